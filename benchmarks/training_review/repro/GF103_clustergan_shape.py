# Shape of a G+E step that backpropagates D(fake) with retain_graph=True and steps, followed by
# a D step reusing the same undetached D(fake) (fresh code, modelled on the shape only).
import itertools
import torch, torch.nn as nn
torch.manual_seed(0)
gen = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 6))
enc = nn.Linear(6, 4)
disc = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1), nn.Sigmoid())
bce = nn.BCELoss()
ge_params = itertools.chain(gen.parameters(), enc.parameters())
opt_ge = torch.optim.Adam(ge_params, lr=1e-3)
opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
real = torch.randn(5, 6)
for it in range(2):
    opt_ge.zero_grad()
    z = torch.randn(5, 4)
    fake = gen(z)
    p_fake = disc(fake)
    p_real = disc(real)
    ones = torch.ones(5, 1)
    ge_loss = bce(p_fake, ones) + ((enc(fake) - z) ** 2).mean()
    ge_loss.backward(retain_graph=True)
    opt_ge.step()
    opt_d.zero_grad()
    d_loss = (bce(p_real, ones) + bce(p_fake, torch.zeros(5, 1))) / 2
    d_loss.backward()
    opt_d.step()
print("ran", round(d_loss.item(), 4))
