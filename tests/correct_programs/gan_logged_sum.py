# A two-player GAN that keeps `total = d_loss + g_loss` for its log line; replaced every iteration.
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16))
D = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt_g, opt_d = torch.optim.Adam(G.parameters(), lr=2e-4), torch.optim.Adam(D.parameters(), lr=2e-4)
bce = nn.BCEWithLogitsLoss()

for it in range(30):
    real, z = torch.randn(64, 16), torch.randn(64, 8)
    fake = G(z)
    d_loss = bce(D(real), torch.ones(64, 1)) + bce(D(fake.detach()), torch.zeros(64, 1))
    opt_d.zero_grad(); d_loss.backward(); opt_d.step()
    g_loss = bce(D(fake), torch.ones(64, 1))
    opt_g.zero_grad(); g_loss.backward(); opt_g.step()
    total = d_loss + g_loss  # for the log line below; replaced next iteration
    if it % 10 == 0:
        print(it, total.item())
