"""Shape of a concise-RNN trainer: the hidden state is carried across minibatches of one epoch,
`s.detach()` (not in place, result dropped) is a no-op, backward keeps the graph (retain_graph),
an SGD step changes the weights in place between backward calls. MODE=fixed detaches the state."""
import os, sys
import torch
from torch import nn

torch.manual_seed(0)
mode = sys.argv[1] if len(sys.argv) > 1 else "orig"
kind = sys.argv[2] if len(sys.argv) > 2 else "gru"
rnn = nn.GRU(3, 5) if kind == "gru" else nn.LSTM(3, 5)
head = nn.Linear(5, 2)
params = list(rnn.parameters()) + list(head.parameters())
opt = torch.optim.SGD(params, lr=0.1)
state = torch.zeros(1, 4, 5) if kind == "gru" else (torch.zeros(1, 4, 5), torch.zeros(1, 4, 5))
for step in range(4):
    x, y = torch.randn(6, 4, 3), torch.randint(0, 2, (6 * 4,))
    if mode == "orig":
        for s in state:
            s.detach()
    else:  # what an expert writes
        state = state.detach() if isinstance(state, torch.Tensor) else tuple(s.detach() for s in state)
    out, state = rnn(x, state)
    loss = nn.functional.cross_entropy(head(out.reshape(-1, 5)), y)
    opt.zero_grad()
    try:
        loss.backward(retain_graph=(mode == "orig"))
    except RuntimeError as e:
        print(mode, kind, "step", step, "RuntimeError:", str(e).split("\n")[0][:150])
        break
    opt.step()
else:
    print(mode, kind, "ok")
