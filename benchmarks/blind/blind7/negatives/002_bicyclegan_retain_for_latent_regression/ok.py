"""BicycleGAN-style model (cVAE-GAN + cLR-GAN) on small 1-D signals: the encoder+generator loss is
backpropagated with retain_graph=True because the latent-regression loss of backward_G_alone()
is backpropagated through the same generator graph afterwards."""
import itertools

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

L, NZ, BATCH = 16, 3, 8


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(L + NZ, 32), nn.ReLU(), nn.Linear(32, L))

    def forward(self, a, z):
        return torch.tanh(self.net(torch.cat([a, z], 1)))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(L, 32), nn.ReLU(), nn.Linear(32, 2 * NZ))

    def forward(self, b):
        mu, logvar = self.net(b).chunk(2, 1)
        return mu, logvar


class BiCycleGANModel:
    def __init__(self, lambda_L1=10.0, lambda_kl=0.01, lambda_z=0.5):
        self.netG, self.netE = Generator(), Encoder()
        self.netD = nn.Sequential(nn.Linear(2 * L, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.optimizer_E = torch.optim.Adam(self.netE.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
        self.lambda_L1, self.lambda_kl, self.lambda_z = lambda_L1, lambda_kl, lambda_z

    def gan_loss(self, a, b, target):
        pred = self.netD(torch.cat([a, b], 1))
        return F.mse_loss(pred, torch.full_like(pred, target))

    def forward(self, real_A, real_B):
        self.real_A, self.real_B = real_A, real_B
        self.mu, self.logvar = self.netE(real_B)
        z_encoded = self.mu + torch.randn_like(self.mu) * (0.5 * self.logvar).exp()
        self.z_random = torch.randn(real_A.size(0), NZ)
        self.fake_B_encoded = self.netG(real_A, z_encoded)
        self.fake_B_random = self.netG(real_A, self.z_random)

    def update_D(self):
        self.optimizer_D.zero_grad()
        loss_D = (self.gan_loss(self.real_A, self.real_B, 1.0) * 2
                  + self.gan_loss(self.real_A, self.fake_B_encoded.detach(), 0.0)
                  + self.gan_loss(self.real_A, self.fake_B_random.detach(), 0.0))
        loss_D.backward()
        self.optimizer_D.step()

    def backward_EG(self):
        loss_G_GAN = self.gan_loss(self.real_A, self.fake_B_encoded, 1.0)
        loss_G_GAN2 = self.gan_loss(self.real_A, self.fake_B_random, 1.0)
        loss_kl = torch.mean(-0.5 * (1 + self.logvar - self.mu.pow(2) - self.logvar.exp())) * self.lambda_kl
        loss_G_L1 = F.l1_loss(self.fake_B_encoded, self.real_B) * self.lambda_L1
        self.loss_G = loss_G_GAN + loss_G_GAN2 + loss_G_L1 + loss_kl
        self.loss_G.backward(retain_graph=True)

    def backward_G_alone(self):
        # latent regression: E(G(A, z)) should recover z; only G is trained by it
        mu2, _ = self.netE(self.fake_B_random)
        self.loss_z_L1 = torch.mean(torch.abs(mu2 - self.z_random)) * self.lambda_z
        self.loss_z_L1.backward()

    @staticmethod
    def set_requires_grad(net, flag):
        for p in net.parameters():
            p.requires_grad_(flag)

    def update_G_and_E(self):
        self.set_requires_grad(self.netD, False)
        self.optimizer_E.zero_grad()
        self.optimizer_G.zero_grad()
        self.backward_EG()
        self.set_requires_grad(self.netE, False)
        self.backward_G_alone()
        self.set_requires_grad(self.netE, True)
        self.optimizer_E.step()
        self.optimizer_G.step()
        self.set_requires_grad(self.netD, True)

    def optimize_parameters(self, real_A, real_B):
        self.forward(real_A, real_B)
        self.update_G_and_E()
        self.update_D()


model = BiCycleGANModel()
freqs = torch.linspace(0.5, 2.0, L)
for it in range(80):
    phase = torch.rand(BATCH, 1) * 3
    real_A = torch.sin(freqs * phase)
    real_B = torch.sign(real_A) * real_A.abs().sqrt()
    model.optimize_parameters(real_A, real_B)
    if it % 20 == 0:
        print(f"iter {it}: G {model.loss_G.item():.4f} z_L1 {model.loss_z_L1.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model.netG, model.netE, model.netD):.8f}")
