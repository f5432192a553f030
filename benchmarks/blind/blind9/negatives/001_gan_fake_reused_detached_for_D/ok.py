"""1-D GAN: one generated batch per iteration, used (detached) for the D update and
(non-detached, rescored by the updated D) for the G update."""
import torch
import torch.nn as nn

torch.manual_seed(0)

N_IDEAS, ART_COMPONENTS = 5, 12
PAINT_POINTS = torch.linspace(-1, 1, ART_COMPONENTS)[None, :]


def artist_works(n):
    a = torch.rand(n, 1) + 1
    return a * PAINT_POINTS.pow(2) + (a - 1)


G = nn.Sequential(nn.Linear(N_IDEAS, 64), nn.ReLU(), nn.Linear(64, ART_COMPONENTS))
D = nn.Sequential(nn.Linear(ART_COMPONENTS, 64), nn.ReLU(), nn.Linear(64, 1), nn.Sigmoid())
opt_D = torch.optim.Adam(D.parameters(), lr=2e-4)
opt_G = torch.optim.Adam(G.parameters(), lr=2e-4)

for step in range(200):
    artist_paintings = artist_works(32)
    G_ideas = torch.randn(32, N_IDEAS)
    G_paintings = G(G_ideas)

    D_real = D(artist_paintings)
    D_fake = D(G_paintings.detach())
    D_loss = -torch.mean(torch.log(D_real) + torch.log(1.0 - D_fake))
    opt_D.zero_grad()
    D_loss.backward()
    opt_D.step()

    prob_fake = D(G_paintings)
    G_loss = torch.mean(torch.log(1.0 - prob_fake))
    opt_G.zero_grad()
    G_loss.backward()
    opt_G.step()
    if step % 50 == 0:
        print(f"step {step}: D_loss {D_loss.item():.4f} G_loss {G_loss.item():.4f} D_real {D_real.mean().item():.3f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(G, D):.8f}")
