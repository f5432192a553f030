"""Vanilla GAN on a 2-D ring of Gaussians, organised like the generative-model-collection
trainers: one class owning G, D, their optimizers and a per-iteration train step."""
import torch
import torch.nn as nn

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)


class generator(nn.Module):
    def __init__(self, z_dim=4):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(z_dim, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, z):
        return self.fc(z)


class discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())

    def forward(self, x):
        return self.fc(x)


class GAN:
    def __init__(self, z_dim=4, batch_size=64):
        self.z_dim, self.batch_size = z_dim, batch_size
        self.G = generator(z_dim)
        self.D = discriminator()
        self.G_optimizer = torch.optim.Adam(self.G.parameters(), lr=1e-3, betas=(0.5, 0.999))
        self.D_optimizer = torch.optim.Adam(self.D.parameters(), lr=1e-3, betas=(0.5, 0.999))
        self.BCE_loss = nn.BCELoss()
        self.y_real_ = torch.ones(batch_size, 1)
        self.y_fake_ = torch.zeros(batch_size, 1)
        self.train_hist = {"D_loss": [], "G_loss": []}

    def d_step(self, x_, z_):
        D_real = self.D(x_)
        D_real_loss = self.BCE_loss(D_real, self.y_real_)
        self.G_ = self.G(z_)
        D_fake = self.D(self.G_)
        D_fake_loss = self.BCE_loss(D_fake, self.y_fake_)
        D_loss = D_real_loss + D_fake_loss
        D_loss.backward()
        self.D_optimizer.step()
        return D_loss

    def g_step(self):
        # reuse the fakes generated for the discriminator update
        D_fake = self.D(self.G_)
        G_loss = self.BCE_loss(D_fake, self.y_real_)
        G_loss.backward()
        self.G_optimizer.step()
        return G_loss

    def train_iter(self, x_):
        z_ = torch.randn(self.batch_size, self.z_dim)
        self.D_optimizer.zero_grad()
        self.G_optimizer.zero_grad()
        D_loss = self.d_step(x_, z_)
        G_loss = self.g_step()
        self.train_hist["D_loss"].append(D_loss.item())
        self.train_hist["G_loss"].append(G_loss.item())


def sample_ring(n):
    k = torch.randint(0, 8, (n,)).double() * (2 * torch.pi / 8)
    return torch.stack([k.cos(), k.sin()], 1) * 2 + 0.05 * torch.randn(n, 2)


gan = GAN()
for it in range(250):
    gan.train_iter(sample_ring(gan.batch_size))
    if it % 50 == 0:
        print(f"iter {it}: D {gan.train_hist['D_loss'][-1]:.4f} G {gan.train_hist['G_loss'][-1]:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(gan.G, gan.D):.8f}")
