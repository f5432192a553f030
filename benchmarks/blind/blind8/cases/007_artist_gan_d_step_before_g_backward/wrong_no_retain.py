"""'Artist works' GAN: the generator paints 1-D curves from noise ideas, the discriminator
tells them apart from the artists' curves a*x^2 + (a-1). One forward pass per iteration is
shared by the discriminator and generator updates."""
import torch
import torch.nn as nn

torch.manual_seed(1)
torch.set_default_dtype(torch.float64)

BATCH_SIZE = 64
N_IDEAS = 5
ART_COMPONENTS = 15
PAINT_POINTS = torch.linspace(-1, 1, ART_COMPONENTS).repeat(BATCH_SIZE, 1)


def artist_works():
    a = torch.rand(BATCH_SIZE, 1) + 1
    return a * PAINT_POINTS.pow(2) + (a - 1)


class PaintingGAN:
    def __init__(self, lr_G=1e-3, lr_D=1e-3):
        self.G = nn.Sequential(nn.Linear(N_IDEAS, 64), nn.ReLU(), nn.Linear(64, ART_COMPONENTS))
        self.D = nn.Sequential(nn.Linear(ART_COMPONENTS, 64), nn.ReLU(), nn.Linear(64, 1), nn.Sigmoid())
        self.opt_D = torch.optim.Adam(self.D.parameters(), lr=lr_D)
        self.opt_G = torch.optim.Adam(self.G.parameters(), lr=lr_G)

    def forward_pass(self):
        artist_paintings = artist_works()
        G_ideas = torch.randn(BATCH_SIZE, N_IDEAS)
        self.G_paintings = self.G(G_ideas)
        self.prob_artist0 = self.D(artist_paintings)   # D tries to increase this
        self.prob_artist1 = self.D(self.G_paintings)   # D tries to reduce this

    def update_D(self):
        D_loss = -torch.mean(torch.log(self.prob_artist0) + torch.log(1.0 - self.prob_artist1))
        self.opt_D.zero_grad()
        D_loss.backward()
        self.opt_D.step()
        return D_loss.item()

    def update_G(self):
        G_loss = torch.mean(torch.log(1.0 - self.prob_artist1))
        self.opt_G.zero_grad()
        G_loss.backward()
        self.opt_G.step()
        return G_loss.item()

    def train_step(self):
        self.forward_pass()
        d = self.update_D()
        g = self.update_G()
        return d, g


gan = PaintingGAN()
for step in range(300):
    d, g = gan.train_step()
    if step % 100 == 0:
        print(f"step {step}: D {d:.4f} G {g:.4f} D accuracy {gan.prob_artist0.mean().item():.3f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(gan.G, gan.D):.8f}")
