"""ok: the carried candidate `x` is a fresh leaf that requires grad (a PINN's collocation points),
only copied by `.to(...)`: its history saves no tensors, so nothing a backward frees is ever
walked again (and the if/elif arms cover every pass anyway)."""
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(1, 8), nn.Tanh(), nn.Linear(8, 1)).double()
opt = torch.optim.SGD(net.parameters(), lr=0.01)
points = torch.linspace(0, 1, 10).reshape(-1, 1)
n = 3
for epoch in range(2):
    for i in range(n + 1):
        if i < n:
            x = points[i * 3:(i + 1) * 3].clone().requires_grad_(True).to(torch.float64)
        elif i == n:
            x = points[i * 3:].clone().requires_grad_(True).to(torch.float64)
        u = net(x)
        du = torch.autograd.grad(u.sum(), x, create_graph=True)[0]
        loss = ((du - 1.0) ** 2).mean() + (u ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
print("ok")
