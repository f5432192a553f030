"""Logging the epoch loss with `running_loss += loss` instead of `loss.item()`.

It runs and prints the right numbers, but running_loss is a tensor whose graph links every
batch's graph of the epoch, keeping them all alive until the epoch ends: memory grows per batch.
"""

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
criterion = nn.MSELoss()
inputs = torch.randn(64, 6)
targets = inputs.sum(dim=1, keepdim=True)
batches = list(zip(inputs.split(8), targets.split(8)))

for epoch in range(3):
    running_loss = 0.0
    for batch_inputs, batch_targets in batches:
        optimizer.zero_grad()
        loss = criterion(model(batch_inputs), batch_targets)
        loss.backward()
        optimizer.step()
        running_loss += loss  # the epoch's total, for the log
    print(f"epoch {epoch}: mean loss {running_loss / len(batches):.4f}")
