"""A projection y = t @ a is computed once, before the loop, and reused every iteration.

Each iteration's graph hangs off the same y; the first backward frees y's buffers, so the
second iteration raises "Trying to backward through the graph a second time".
"""

import torch

torch.manual_seed(0)
criterion = torch.nn.MSELoss()
target = torch.tensor([1.0, 0.0], dtype=torch.float64)
transform = torch.eye(2, dtype=torch.float64, requires_grad=True)
offset = torch.ones(2, dtype=torch.float64, requires_grad=True)
projected = transform @ offset  # the offset, projected

for iteration in range(2):
    output = transform @ (target + projected)
    loss = criterion(output, target)
    loss.backward()
    print(f"iteration {iteration}: loss {loss.item():.4f}")

print("offset.grad:", offset.grad)
