"""A model hands itself to a batch runner (`runner = ...(self, totals)`), which runs the model's step
and adds the loss terms it returns to a totals object; the runner keeps that object in a field of
the same name as the totals' own dict. Each total holds the graph of every batch of the epoch."""
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class Totals:
    totals: dict = field(default_factory=lambda: {"mse": 0.0, "mae": 0.0})

    def add(self, terms):
        for key, term in terms.items():
            self.totals[key] += term


class BatchRunner:
    def __init__(self, model, totals):
        self.model = model
        self.totals = totals

    def run(self, x):
        terms = self.model.step(x, x.mean(1, keepdim=True))
        self.totals.add(terms)


class Regressor:
    def __init__(self):
        self.net = nn.Linear(5, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def step(self, x, y):
        pred = self.net(x)
        mse = (pred - y).pow(2).mean()
        self.opt.zero_grad()
        mse.backward()
        self.opt.step()
        return {"mse": mse, "mae": (pred - y).abs().mean()}

    def epoch(self, batches):
        totals = Totals()
        runner = BatchRunner(self, totals)
        for x in batches:
            runner.run(x)
        return {key: float(total) for key, total in totals.totals.items()}


torch.manual_seed(0)
print(Regressor().epoch(torch.randn(4, 6, 5)))
