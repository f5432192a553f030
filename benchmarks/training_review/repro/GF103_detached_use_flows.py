# ok: VAE-GAN-like steps. `z = E(x)` does carry a graph, but the D step only uses `G(z).detach()`,
# so its backward never reaches z's graph; the G step then backpropagates through G(z) and E once.
import torch, torch.nn as nn
torch.manual_seed(0)
E = nn.Linear(6, 4)
G = nn.Linear(4, 6)
D = nn.Linear(6, 1)
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_e = torch.optim.Adam(E.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
for _ in range(3):
    x = torch.randn(5, 6)
    z = E(x)
    fake = G(z).detach()
    loss_d = nn.functional.softplus(-D(x)).mean() + nn.functional.softplus(D(fake)).mean()
    opt_d.zero_grad()
    loss_d.backward()
    opt_d.step()
    recon = G(z)
    loss_g = nn.functional.softplus(-D(recon)).mean() + ((recon - x) ** 2).mean()
    opt_g.zero_grad(); opt_e.zero_grad()
    loss_g.backward()
    opt_g.step(); opt_e.step()
print("ran", round(loss_g.item(), 4))
