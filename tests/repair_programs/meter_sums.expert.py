"""A meter summing each named loss for the epoch's means: the tensors it adds keep every step's
graph alive. The expert keeps numbers (``.item()``) where the sums are filled; the means, read
with ``float``, are the same."""
import collections

import torch

torch.manual_seed(0)


class Meter:
    def __init__(self):
        self.sums = collections.defaultdict(float)
        self.count = 0

    def update(self, values):
        for name, value in values.items():
            self.sums[name] += value.item()
        self.count += 1

    def means(self):
        return {name: float(total) / self.count for name, total in self.sums.items()}


net = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
meter = Meter()
for step in range(40):
    x = torch.randn(8, 3)
    mse = (net(x) - x.sum(1, keepdim=True)).pow(2).mean()
    l1 = net.weight.abs().sum()
    losses = {"loss": mse + 0.01 * l1, "mse": mse}
    opt.zero_grad()
    losses["loss"].backward()
    opt.step()
    meter.update(losses)
print(meter.means())
