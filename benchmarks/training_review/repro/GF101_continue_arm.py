"""ok: every arm of the if/else either assigns `out` or leaves the pass with `continue`, so the
read after it always sees this pass's `out` (an arm that cannot fall through defines vacuously)."""
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Linear(2, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
data = torch.randn(9, 2)
n = 3
for i in range(n + 1):
    if i < n:
        out = net(data[i * 3:(i + 1) * 3])
    else:
        rest = data[i * 3:]
        if rest.shape[0] == 0:
            continue
        else:
            out = net(rest)
    loss = (out ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ok")
