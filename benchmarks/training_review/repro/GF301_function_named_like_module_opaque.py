# GF301 false positive (and crashing fix), second shape of the same cause: a helper that graphfix
# cannot see into, whose NAME ends in `_model`, is taken for a module forward returning a graph.
# It returns two Python floats (an evaluation under no_grad). Renaming it to `evaluate_loaders`
# makes the finding disappear.
import types

import torch


def _evaluate(net, xs):
    with torch.no_grad():
        return net(xs).pow(2).mean().item(), net(-xs).pow(2).mean().item()


tools = types.SimpleNamespace(evaluate_model=_evaluate)   # stands for `from mypkg import evaluate_model`

torch.manual_seed(0)
net = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
train_hist, val_hist = [], []
for step in range(4):
    opt.zero_grad()
    net(torch.randn(8, 3)).pow(2).mean().backward()
    opt.step()
    train_loss, val_loss = tools.evaluate_model(net, torch.randn(8, 3))
    train_hist.append(train_loss)
    val_hist.append(val_loss)
print([round(v, 4) for v in train_hist + val_hist])
