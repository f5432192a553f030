# Harness check (seed 002), wrong fix: detach y; no error, but a.grad stays None.
import torch

measure = torch.nn.MSELoss()
x = torch.tensor([1, 0], dtype=torch.float64)
t = torch.eye(2, dtype=torch.float64, requires_grad=True)
a = torch.ones(2, dtype=torch.float64, requires_grad=True)
y = (t @ a).detach()

for _ in range(2):
    x_out = t @ (x + y)
    loss = measure(x_out, x)
    loss.backward()
