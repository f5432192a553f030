"""Hinge-loss GAN on a 2-D mixture of Gaussians, organised like a SAGAN-style Trainer class."""
import math

import torch
import torch.nn as nn

torch.manual_seed(0)

Z_DIM = 8


def mixture_batch(gen, n=64, modes=6):
    k = torch.randint(0, modes, (n,), generator=gen)
    angle = 2 * math.pi * k.float() / modes
    centres = torch.stack([torch.cos(angle), torch.sin(angle)], 1) * 2.0
    return centres + 0.1 * torch.randn(n, 2, generator=gen)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(Z_DIM, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 2))

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


class Trainer:
    def __init__(self, total_step=150, batch_size=64):
        self.G, self.D = Generator(), Discriminator()
        self.g_optimizer = torch.optim.Adam(self.G.parameters(), lr=1e-4, betas=(0.0, 0.9))
        self.d_optimizer = torch.optim.Adam(self.D.parameters(), lr=4e-4, betas=(0.0, 0.9))
        self.total_step, self.batch_size = total_step, batch_size
        self.data_gen = torch.Generator().manual_seed(1)
        self.log = []

    def _discriminator_step(self, real_images):
        z = torch.randn(self.batch_size, Z_DIM)
        fake_images = self.G(z)
        d_out_real = self.D(real_images)
        d_out_fake = self.D(fake_images)
        errD = torch.relu(1.0 - d_out_real).mean() + torch.relu(1.0 + d_out_fake).mean()
        self.d_optimizer.zero_grad()
        errD.backward()
        self.d_optimizer.step()
        return fake_images, errD.item()

    def _generator_step(self, fake_images):
        g_out_fake = self.D(fake_images)
        errG = -g_out_fake.mean()
        self.g_optimizer.zero_grad()
        errG.backward()
        self.g_optimizer.step()
        return errG.item()

    def train(self):
        for step in range(self.total_step):
            real_images = mixture_batch(self.data_gen, self.batch_size)
            fake_images, d_loss = self._discriminator_step(real_images)
            g_loss = self._generator_step(fake_images)
            self.log.append((d_loss, g_loss))
            if step % 50 == 0:
                print(f"step {step}: errD {d_loss:.4f} errG {g_loss:.4f}")


trainer = Trainer()
trainer.train()


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(trainer.G, trainer.D):.8f}")
