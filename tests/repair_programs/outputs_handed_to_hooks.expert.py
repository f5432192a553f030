"""A regression trainer that fires its hooks by name (``getattr(hook, event)(...)``) with the
dict of loss tensors of each step; the hook in another module (hooks/) adds them up per name
and keeps the sums, which keep the graph of every step alive. The expert hands the hooks
numbers where the trainer fires them."""
import torch

from hooks import Totals

torch.manual_seed(0)


class Trainer:
    def __init__(self, hooks):
        self.net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.05)
        self.hooks = hooks

    def fire(self, event, *args):
        for hook in self.hooks:
            getattr(hook, event)(*args)

    def fit(self, steps):
        for _ in range(steps):
            x = torch.randn(16, 3)
            fit = (self.net(x).squeeze(1) - x.sum(1)).pow(2).mean()
            size = self.net[0].weight.pow(2).sum()
            outputs = {"fit": fit, "size": size}
            self.opt.zero_grad()
            (fit + 1e-3 * size).backward()
            self.opt.step()
            self.fire("after_step", {name: value.item() for name, value in outputs.items()})


totals = Totals()
Trainer([totals]).fit(30)
print("done", {name: float(value) for name, value in totals.totals.items()})
