"""Tabular classifier with a hand-written batch-norm layer (running statistics for evaluation); trained by train_loop.fit."""
import torch
import torch.nn as nn

from train_loop import fit

torch.manual_seed(0)


class MyBatchNorm1d(nn.Module):
    def __init__(self, num_features, momentum=0.1, eps=1e-5):
        super().__init__()
        self.momentum, self.eps = momentum, eps
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        if self.training:
            mean = x.mean(0)
            var = x.var(0, unbiased=False)
            n = x.shape[0]
            with torch.no_grad():
                self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean
                self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * n / (n - 1)
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class TabularNet(nn.Module):
    def __init__(self, n_in=12, hidden=48, n_classes=4):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, hidden), MyBatchNorm1d(hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), MyBatchNorm1d(hidden), nn.ReLU(),
                                 nn.Linear(hidden, n_classes))

    def forward(self, x):
        return self.net(x)


def make_batches(n, bs=32, n_in=12, n_classes=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n_in, n_classes, generator=torch.Generator().manual_seed(7))
    out = []
    for _ in range(n):
        x = torch.randn(bs, n_in, generator=gen) * 2 + 1
        out.append((x, (x @ w).argmax(1)))
    return out


model = TabularNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
fit(model, optimizer, make_batches(40), make_batches(5, seed=1), epochs=5)


def checksum(module):
    return sum(float(t.detach().double().abs().sum()) for t in list(module.parameters()) + list(module.buffers()))


print(f"CHECKSUM {checksum(model):.8f}")
