"""Small sequence GAN (generator maps noise to a short 1-D 'clip'), alternating D and G updates."""
import torch
import torch.nn as nn

torch.manual_seed(0)

NZ, T = 6, 8


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(NZ, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU(), nn.Linear(48, T))

    def forward(self, z):
        return torch.tanh(self.net(z))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(T, 48), nn.LeakyReLU(0.2), nn.Linear(48, 1))

    def forward(self, clip):
        return self.net(clip).squeeze(1)


def real_clips(n):
    phase = torch.rand(n, 1) * 6.28
    t = torch.arange(T).float()[None, :] * 0.7
    return 0.8 * torch.sin(t + phase)


G, D = Generator(), Discriminator()
optimizerG = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.999))
optimizerD = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.5, 0.999))
criterion = nn.BCEWithLogitsLoss()

for it in range(150):
    real = real_clips(32)
    ones, zeros = torch.ones(32), torch.zeros(32)
    z = torch.randn(32, NZ)
    fake = G(z).detach()

    # ---- update D
    optimizerD.zero_grad()
    D_real = D(real)
    D_fake = D(fake)
    D_loss = criterion(D_real, ones) + criterion(D_fake, zeros)
    D_loss.backward()
    optimizerD.step()

    # ---- update G
    optimizerG.zero_grad()
    D_fake_for_G = D(fake)
    G_loss = criterion(D_fake_for_G, ones)
    G_loss.backward()
    optimizerG.step()
    if it % 50 == 0:
        print(f"it {it}: D_loss {D_loss.item():.4f} G_loss {G_loss.item():.4f} D(x) {torch.sigmoid(D_real).mean().item():.3f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(G, D):.8f}")
