"""StyleGAN2-style generator training with lazy path-length regularisation: every few steps a
separate forward pass measures |J^T y| w.r.t. the latents and penalises its deviation from a
running mean."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import autograd

torch.manual_seed(0)

Z, W_DIM, IMG = 8, 8, 32


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.mapping = nn.Sequential(nn.Linear(Z, W_DIM), nn.LeakyReLU(0.2), nn.Linear(W_DIM, W_DIM))
        self.synthesis = nn.Sequential(nn.Linear(W_DIM, 32), nn.LeakyReLU(0.2), nn.Linear(32, IMG))

    def forward(self, z, return_latents=False):
        latents = self.mapping(z)
        img = self.synthesis(latents)
        return (img, latents) if return_latents else img


def g_path_regularize(fake_img, latents, mean_path_length, decay=0.01):
    noise = torch.randn_like(fake_img) / math.sqrt(fake_img.shape[1])
    grad, = autograd.grad(outputs=(fake_img * noise).sum(), inputs=latents, create_graph=True)
    path_lengths = grad.pow(2).sum(1).sqrt()
    path_mean = mean_path_length + decay * (path_lengths.mean() - mean_path_length)
    path_penalty = (path_lengths - path_mean).pow(2).mean()
    return path_penalty, path_mean.detach(), path_lengths


def g_nonsaturating_loss(fake_pred):
    return F.softplus(-fake_pred).mean()


def d_logistic_loss(real_pred, fake_pred):
    return F.softplus(-real_pred).mean() + F.softplus(fake_pred).mean()


def train(generator, discriminator, real_data, iters=120, bs=16, g_reg_every=4, path_regularize=2.0):
    g_optim = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.0, 0.99))
    d_optim = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.0, 0.99))
    mean_path_length = 0
    for i in range(iters):
        real_img = real_data[torch.randint(0, real_data.size(0), (bs,))]
        # discriminator
        with torch.no_grad():
            fake_img = generator(torch.randn(bs, Z))
        d_loss = d_logistic_loss(discriminator(real_img), discriminator(fake_img))
        d_optim.zero_grad()
        d_loss.backward()
        d_optim.step()
        # generator
        fake_img = generator(torch.randn(bs, Z))
        g_loss = g_nonsaturating_loss(discriminator(fake_img))
        generator.zero_grad()
        g_loss.backward()
        g_optim.step()
        # lazy path-length regularisation on its own forward pass
        if i % g_reg_every == 0:
            fake_img, latents = generator(torch.randn(bs // 2, Z), return_latents=True)
            path_loss, mean_path_length, path_lengths = g_path_regularize(fake_img, latents, mean_path_length)
            generator.zero_grad()
            weighted_path_loss = path_regularize * g_reg_every * path_loss
            weighted_path_loss.backward()
            g_optim.step()
        if i % 40 == 39:
            print(f"iter {i + 1}: d {d_loss.item():.4f} g {g_loss.item():.4f} path {float(mean_path_length):.4f}")


generator = Generator()
discriminator = nn.Sequential(nn.Linear(IMG, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
real_data = torch.tanh(torch.randn(256, 4) @ torch.randn(4, IMG))
train(generator, discriminator, real_data)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(generator, discriminator):.8f}")
