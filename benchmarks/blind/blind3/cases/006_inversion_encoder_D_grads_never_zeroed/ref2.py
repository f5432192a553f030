"""In-domain GAN inversion (encoder training): a frozen generator, an encoder trained to map images
to latent codes that reconstruct them, and a discriminator that keeps reconstructions realistic."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

LATENT, IMG = 8, 64


def mlp(i, h, o):
    return nn.Sequential(nn.Linear(i, h), nn.LeakyReLU(0.2), nn.Linear(h, h), nn.LeakyReLU(0.2), nn.Linear(h, o))


class InversionTrainer:
    def __init__(self, generator, lambda_adv=0.1):
        self.G = generator
        self.E = mlp(IMG, 64, LATENT)
        self.D = mlp(IMG, 64, 1)
        self.lambda_adv = lambda_adv
        self.opt_E = torch.optim.Adam(self.E.parameters(), lr=1e-3, betas=(0.0, 0.99))
        self.opt_D = torch.optim.Adam(self.D.parameters(), lr=1e-3, betas=(0.0, 0.99))

    def train_D(self, x_real):
        self.opt_D.zero_grad()
        with torch.no_grad():
            x_rec = self.G(self.E(x_real))
        D_real = self.D(x_real)
        D_fake = self.D(x_rec)
        D_loss = F.softplus(D_fake).mean() + F.softplus(-D_real).mean()
        D_loss.backward()
        self.opt_D.step()
        return D_loss.item()

    def train_E(self, x_real):
        self.opt_E.zero_grad()
        x_rec = self.G(self.E(x_real))
        loss_pix = F.mse_loss(x_rec, x_real)
        loss_adv = F.softplus(-self.D(x_rec)).mean()
        E_loss = loss_pix + self.lambda_adv * loss_adv
        E_loss.backward()
        self.opt_E.step()
        return loss_pix.item()

    def train(self, images, iters=150, bs=32):
        for it in range(iters):
            idx = torch.randint(0, images.size(0), (bs,))
            x = images[idx]
            d = self.train_D(x)
            pix = self.train_E(x)
            if it % 50 == 49:
                print(f"iter {it + 1}: D {d:.4f} pix {pix:.4f}")


G = mlp(LATENT, 64, IMG)
for p in G.parameters():
    p.requires_grad_(False)
with torch.no_grad():
    images = G(torch.randn(512, LATENT)) + 0.05 * torch.randn(512, IMG)

trainer = InversionTrainer(G)
trainer.train(images)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(trainer.E, trainer.D):.8f}")
