"""A classifier step that calls backward twice on the same loss.

The first call is hidden in a gradient-norm logging helper; the training step then calls
backward again and raises "Trying to backward through the graph a second time".
"""

import torch
from torch import nn


def gradient_norm(model: nn.Module, loss: torch.Tensor) -> float:
    model.zero_grad()
    loss.backward()
    return torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()


torch.manual_seed(0)
model = nn.Linear(5, 2)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
criterion = nn.CrossEntropyLoss()
inputs = torch.randn(4, 5)
targets = torch.tensor([0, 1, 1, 0])

for step in range(3):
    loss = criterion(model(inputs), targets)
    print(f"step {step}: loss {loss.item():.4f} grad norm {gradient_norm(model, loss):.4f}")
    optimizer.zero_grad()
    loss.backward()  # second backward through the same graph
    optimizer.step()
