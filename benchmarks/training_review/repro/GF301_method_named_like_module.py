# GF301 false positive (and crashing fix): a method of this class whose NAME ends in `_model`
# is taken for an nn.Module forward, although its visible body returns `loss.item()` (a float).
# graphfix rewrites `losses.append(loss)` to `losses.append(loss.detach())` -> AttributeError.
import torch


class Agent:
    def __init__(self):
        self.net = torch.nn.Linear(3, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def update_model(self):
        loss = self.net(torch.randn(4, 3)).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()

    def train(self, steps=5):
        losses = []
        for _ in range(steps):
            loss = self.update_model()
            losses.append(loss)
        return losses


torch.manual_seed(0)
print([round(v, 4) for v in Agent().train()])
