"""Two optimizer-protocol mistakes in one training script.

1. optimizer.zero_grad() sits between loss.backward() and optimizer.step(): every step
   applies zero gradients, so the loss never moves (runs silently).
2. Gradient accumulation calls loss.backward() once more after the micro-batch loop:
   "Trying to backward through the graph a second time".
"""

import torch
from torch import nn


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(10, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


torch.manual_seed(0)
inputs = torch.randn(4, 10)
labels = torch.randn(4, 1)
model = Regressor()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.MSELoss()

for epoch in range(3):
    loss = criterion(model(inputs), labels)
    loss.backward()
    optimizer.zero_grad()  # clear the gradients
    optimizer.step()
    print(f"epoch {epoch}: loss {loss.item():.4f}")  # this epoch's loss

accumulation_steps = 2
for start in range(0, len(inputs), accumulation_steps):
    optimizer.zero_grad()
    for offset in range(accumulation_steps):
        batch = start + offset
        loss = criterion(model(inputs[batch : batch + 1]), labels[batch : batch + 1])
        loss.backward()
    loss.backward()  # once more, after the micro-batches
    optimizer.step()
