"""ok: `out` is not bound before the loop and is assigned on every pass by one arm of an if/elif
whose test never changes inside the loop (a configuration value): no pass can read an earlier
pass's `out` (if no arm matched, the first pass would raise NameError instead)."""
import sys
import torch
from torch import nn

torch.manual_seed(0)
mode = sys.argv[1] if len(sys.argv) > 1 else "small"
net_small, net_big = nn.Linear(3, 1), nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD([*net_small.parameters(), *net_big.parameters()], lr=0.1)
for step in range(3):
    x, y = torch.randn(4, 3), torch.randn(4, 1)
    if mode == "small":
        out = net_small(x)
    elif mode == "big":
        out = net_big(x)
    loss = ((out - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ok", mode)
