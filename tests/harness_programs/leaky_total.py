# Harness check: `total += loss` keeps every iteration's graph alive.
import torch
from torch import nn

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data, target = torch.randn(16, 4), torch.randn(16, 1)

total = 0.0
for _ in range(20):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(data), target)
    loss.backward()
    optimizer.step()
    total += loss
