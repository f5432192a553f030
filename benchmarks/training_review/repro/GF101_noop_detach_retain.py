"""TRUE, no fix offered: `s.detach()` returns a new tensor and drops it, so the LSTM state keeps
its graph into the next minibatch; `retain_graph=True` silences "backward a second time" but
the next backward walks the previous minibatch's graph, whose saved weights the optimizer step
changed in place -> RuntimeError (modified by an inplace operation). The expert version is
GF101_noop_detach_retain_fixed.py."""
import torch
from torch import nn

torch.manual_seed(0)
rnn, head = nn.LSTM(3, 5), nn.Linear(5, 2)
opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)
state = (torch.zeros(1, 4, 5), torch.zeros(1, 4, 5))
for step in range(3):
    x, y = torch.randn(6, 4, 3), torch.randint(0, 2, (24,))
    for s in state:
        s.detach()
    out, state = rnn(x, state)
    loss = nn.functional.cross_entropy(head(out.reshape(-1, 5)), y)
    opt.zero_grad()
    loss.backward(retain_graph=True)
    opt.step()
print("ok")
