"""The expert fix of GF101_noop_detach_retain.py: cut the carried (h, c) state for real, as a
tuple, at the start of each minibatch, and drop the `retain_graph=True` band-aid."""
import torch
from torch import nn

torch.manual_seed(0)
rnn, head = nn.LSTM(3, 5), nn.Linear(5, 2)
opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)
state = (torch.zeros(1, 4, 5), torch.zeros(1, 4, 5))
for step in range(3):
    x, y = torch.randn(6, 4, 3), torch.randint(0, 2, (24,))
    state = tuple(s.detach() for s in state)
    out, state = rnn(x, state)
    loss = nn.functional.cross_entropy(head(out.reshape(-1, 5)), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ok")
