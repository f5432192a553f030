"""A trainer given its classifier at construction stores its loss in a field and backpropagates it
twice, the optimizer stepping in between. The second backward meets the graph the first freed
('backward through the graph a second time', GF106's finding), before any saved weight is
compared: not a stale walk of the stepped weights (GF108)."""
import torch
from torch import nn


class Trainer:
    def __init__(self, net, opt):
        self.net = net
        self.opt = opt

    def step(self, x, y):
        self.loss = nn.functional.cross_entropy(self.net(x), y)
        self.opt.zero_grad()
        self.loss.backward()
        self.opt.step()
        self.loss.backward()


torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
trainer = Trainer(net, opt)
for x in torch.randn(2, 6, 4):
    trainer.step(x, torch.arange(6) % 3)
print(trainer.loss.item())
