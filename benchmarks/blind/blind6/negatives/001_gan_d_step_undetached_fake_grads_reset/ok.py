"""Vanilla GAN on a 2-D ring: the discriminator loss is computed on G(z) without detach; every
backward is preceded by reset_grad() on both optimizers and the generator step samples a new batch."""
import math

import torch
import torch.nn as nn

torch.manual_seed(0)

LATENT = 4
G = nn.Sequential(nn.Linear(LATENT, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())
criterion = nn.BCELoss()
d_optimizer = torch.optim.Adam(D.parameters(), lr=1e-3)
g_optimizer = torch.optim.Adam(G.parameters(), lr=1e-3)


def reset_grad():
    d_optimizer.zero_grad()
    g_optimizer.zero_grad()


def real_batches(n=20, bs=64):
    out = []
    for _ in range(n):
        angle = torch.rand(bs) * 2 * math.pi
        out.append(torch.stack([angle.cos(), angle.sin()], 1) * 2 + 0.05 * torch.randn(bs, 2))
    return out


data = real_batches()
for epoch in range(3):
    for i, images in enumerate(data):
        bs = images.size(0)
        real_labels = torch.ones(bs, 1)
        fake_labels = torch.zeros(bs, 1)

        # Train the discriminator
        outputs = D(images)
        d_loss_real = criterion(outputs, real_labels)
        z = torch.randn(bs, LATENT)
        fake_images = G(z)
        outputs = D(fake_images)
        d_loss_fake = criterion(outputs, fake_labels)
        d_loss = d_loss_real + d_loss_fake
        reset_grad()
        d_loss.backward()
        d_optimizer.step()

        # Train the generator on a fresh fake batch
        z = torch.randn(bs, LATENT)
        fake_images = G(z)
        outputs = D(fake_images)
        g_loss = criterion(outputs, real_labels)
        reset_grad()
        g_loss.backward()
        g_optimizer.step()
    print(f"epoch {epoch}: d_loss {d_loss.item():.4f} g_loss {g_loss.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(G, D):.8f}")
