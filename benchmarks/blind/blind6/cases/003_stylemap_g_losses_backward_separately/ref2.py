"""Autoencoder-GAN with a mode-dispatching wrapper module (as used with DataParallel): forward(real, "D")
returns the discriminator loss, forward(real, "G") the adversarial and latent-reconstruction losses."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

DATA, LATENT = 8, 4


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(DATA, 32), nn.LeakyReLU(0.2), nn.Linear(32, LATENT))

    def forward(self, x):
        return self.net(x)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(LATENT, 32), nn.LeakyReLU(0.2), nn.Linear(32, DATA))

    def forward(self, w):
        return self.net(w)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(DATA, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x)


class AutoGANModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.generator = Generator()
        self.discriminator = Discriminator()

    def forward(self, real, mode):
        if mode == "D":
            with torch.no_grad():
                fake = self.generator(self.encoder(real))
            real_pred, fake_pred = self.discriminator(real), self.discriminator(fake)
            return F.softplus(fake_pred).mean() + F.softplus(-real_pred).mean()
        if mode == "G":
            stylecode = self.encoder(real)
            fake = self.generator(stylecode)
            adv_loss = F.softplus(-self.discriminator(fake)).mean()
            w_rec_loss = F.mse_loss(self.encoder(fake), stylecode)
            return adv_loss, w_rec_loss, stylecode
        raise ValueError(mode)


def requires_grad(module, flag):
    for p in module.parameters():
        p.requires_grad_(flag)


def sample_real(n=32):
    z = torch.randn(n, 2)
    basis = torch.linspace(-1, 1, DATA)
    return torch.tanh(z[:, :1] * basis + z[:, 1:]) + 0.02 * torch.randn(n, DATA)


model = AutoGANModel()
g_optim = torch.optim.Adam(list(model.encoder.parameters()) + list(model.generator.parameters()), lr=2e-3, betas=(0.0, 0.99))
d_optim = torch.optim.Adam(model.discriminator.parameters(), lr=2e-3, betas=(0.0, 0.99))
lambda_adv, lambda_w_rec = 1.0, 5.0

for it in range(80):
    real = sample_real()

    requires_grad(model.discriminator, True)
    d_loss = model(real, "D")
    d_optim.zero_grad()
    d_loss.backward()
    d_optim.step()

    requires_grad(model.discriminator, False)
    adv_loss, w_rec_loss, stylecode = model(real, "G")
    g_optim.zero_grad()
    (adv_loss * lambda_adv).backward(retain_graph=True)
    (w_rec_loss * lambda_w_rec).backward()
    g_optim.step()
    if it % 20 == 0:
        print(f"iter {it}: d {d_loss.item():.4f} adv {adv_loss.item():.4f} w_rec {w_rec_loss.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
