# GF301 false positive (and crashing fix): an object with a `.backward()` method (a custom loss
# accumulator) is taken for a graph tensor, and ANY method called on it (`value()`, which returns a
# Python float) for a tensor op keeping that graph. The fix `.detach()` on the float crashes.
import torch


class SumLoss:
    def add(self, out, target):
        self.total = self.total + ((out - target) ** 2).mean()

    def backward(self):
        self.total.backward()

    def value(self):
        return self.total.item()


class Trainer:
    def __init__(self):
        self.crit, self.net = SumLoss(), torch.nn.Linear(2, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def step(self, x, y):
        crit = self.crit
        crit.total = 0
        crit.add(self.net(x), y)
        self.opt.zero_grad()
        crit.backward()
        self.opt.step()
        return crit.value()

    def fit(self, n=4):
        running = 0
        for _ in range(n):
            running += self.step(torch.randn(8, 2), torch.randn(8, 1))
        return running / n


torch.manual_seed(0)
print(round(Trainer().fit(), 4))
