# A smoothed log value over the last ten losses, tensors kept in a deque(maxlen=10): poor style,
# bounded memory, not a leak.
from collections import deque

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 8), torch.randn(32, 1)
recent = deque(maxlen=10)
for step in range(40):
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    recent.append(loss)
    if step % 10 == 9:
        print(step, sum(l.item() for l in recent) / len(recent))
