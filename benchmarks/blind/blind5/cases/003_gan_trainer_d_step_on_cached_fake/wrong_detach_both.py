"""Vanilla GAN on a 2-D ring of Gaussians, written as a small trainer with dicts of nets/optimizers.

The generator output for the current batch is produced once (``self.fake``) and shared by
the discriminator update and the generator update, as in the DCGAN example.
"""
import math

import torch
import torch.nn as nn

torch.manual_seed(0)

NZ = 8


def ring_batch(bs, n_modes=6, radius=2.0):
    k = torch.randint(0, n_modes, (bs,)).float()
    ang = 2 * math.pi * k / n_modes
    centers = torch.stack([radius * torch.cos(ang), radius * torch.sin(ang)], 1)
    return centers + 0.05 * torch.randn(bs, 2)


class GANTrainer:
    def __init__(self, lr=2e-4, betas=(0.5, 0.999)):
        self.nets = {
            "G": nn.Sequential(nn.Linear(NZ, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2)),
            "D": nn.Sequential(nn.Linear(2, 64), nn.LeakyReLU(0.2), nn.Linear(64, 64), nn.LeakyReLU(0.2),
                               nn.Linear(64, 1)),
        }
        self.opt = {k: torch.optim.Adam(n.parameters(), lr=lr, betas=betas) for k, n in self.nets.items()}
        self.criterion = nn.BCEWithLogitsLoss()
        self.fake = None

    def set_input(self, real):
        self.real = real
        self.noise = torch.randn(real.size(0), NZ)

    def forward(self):
        self.fake = self.nets["G"](self.noise)

    def _labels(self, value):
        return torch.full((self.real.size(0), 1), value)

    def update_D(self):
        netD = self.nets["D"]
        netD.zero_grad()
        errD_real = self.criterion(netD(self.real), self._labels(1.0))
        errD_real.backward()
        errD_fake = self.criterion(netD(self.fake.detach()), self._labels(0.0))
        errD_fake.backward()
        self.opt["D"].step()
        return (errD_real + errD_fake).item()

    def update_G(self):
        netG, netD = self.nets["G"], self.nets["D"]
        netG.zero_grad()
        errG = self.criterion(netD(self.fake.detach()), self._labels(1.0))
        errG.backward()
        self.opt["G"].step()
        return errG.item()

    def optimize_parameters(self, real):
        self.set_input(real)
        self.forward()
        errD = self.update_D()
        errG = self.update_G()
        return errD, errG


trainer = GANTrainer()
for step in range(300):
    errD, errG = trainer.optimize_parameters(ring_batch(64))
    if step % 100 == 0:
        print(f"step {step}: errD {errD:.4f} errG {errG:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(*trainer.nets.values()):.8f}")
