"""ok: the recurrent state (a tuple of tensors) is cut at the start of every pass by detaching
each element in place (`for s in state: s.detach_()`); the read then sees graph-free tensors."""
import torch
from torch import nn

torch.manual_seed(0)
w_x, w_h = nn.Parameter(torch.randn(3, 5) * 0.3), nn.Parameter(torch.randn(5, 5) * 0.3)
opt = torch.optim.SGD([w_x, w_h], lr=0.1)
state = (torch.zeros(4, 5),)
for step in range(4):
    x, y = torch.randn(4, 3), torch.randn(4, 5)
    for s in state:
        s.detach_()
    (h,) = state
    h = torch.tanh(x @ w_x + h @ w_h)
    state = (h,)
    loss = ((h - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ok")
