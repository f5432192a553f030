"""ok: `step` keeps its recurrent state on `self` between the calls one `forward` makes while
unrolling a sequence; `forward` first resets that state to fresh zeros (through `init_state`),
so nothing survives from one forward (one backward) into the next. Detaching it would cut
backpropagation through time inside the sequence."""
import torch
from torch import nn


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(3, 4)
        self.out = nn.Linear(4, 2)

    def init_state(self, batch):
        self.h = torch.zeros(batch, 4)
        self.c = torch.zeros(batch, 4)

    def step(self, x):
        self.h, self.c = self.cell(x, (self.h, self.c))
        return self.out(self.h)

    def forward(self, xs):
        self.init_state(xs.size(1))
        return torch.stack([self.step(x) for x in xs])


torch.manual_seed(0)
dec = Decoder()
opt = torch.optim.SGD(dec.parameters(), lr=0.1)
for _ in range(3):
    loss = dec(torch.randn(5, 2, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ok")
