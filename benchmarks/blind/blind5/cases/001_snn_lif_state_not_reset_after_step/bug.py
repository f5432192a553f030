"""Spiking MLP (LIF neurons, surrogate gradient) trained with rate-coded outputs.

The LIF nodes keep their membrane potential ``v`` as module state between calls, as
SpikingJelly / snnTorch neurons do, so the network has to be reset after each sample batch.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ATanSurrogate(torch.autograd.Function):
    """Heaviside forward, arctan surrogate derivative backward."""

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        return (x >= 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        a = ctx.alpha
        return grad_output * (a / 2) / (1 + (math.pi / 2 * a * x) ** 2), None


class LIFNode(nn.Module):
    def __init__(self, tau=2.0, v_threshold=1.0, v_reset=0.0, alpha=2.0):
        super().__init__()
        self.tau, self.v_threshold, self.v_reset, self.alpha = tau, v_threshold, v_reset, alpha
        self.v = v_reset

    def reset(self):
        self.v = self.v_reset

    def forward(self, x):
        self.v = self.v + (x - (self.v - self.v_reset)) / self.tau
        spike = ATanSurrogate.apply(self.v - self.v_threshold, self.alpha)
        self.v = spike * self.v_reset + (1.0 - spike) * self.v
        return spike


def reset_net(net: nn.Module):
    for m in net.modules():
        if hasattr(m, "reset") and m is not net:
            m.reset()


class SpikingMLP(nn.Module):
    def __init__(self, n_in=20, n_hidden=64, n_out=4):
        super().__init__()
        self.fc1 = nn.Linear(n_in, n_hidden)
        self.sn1 = LIFNode()
        self.fc2 = nn.Linear(n_hidden, n_out)
        self.sn2 = LIFNode()

    def forward(self, x):
        return self.sn2(self.fc2(self.sn1(self.fc1(x))))


@dataclass
class Config:
    T: int = 6
    epochs: int = 3
    lr: float = 1e-3
    n_batches: int = 16
    batch_size: int = 32


def make_data(cfg):
    proto = torch.randn(4, 20) * 1.5
    batches = []
    for _ in range(cfg.n_batches):
        y = torch.randint(0, 4, (cfg.batch_size,))
        x = proto[y] + 0.8 * torch.randn(cfg.batch_size, 20)
        batches.append((x, y))
    return batches


class Trainer:
    def __init__(self, model, cfg):
        self.model, self.cfg = model, cfg
        self.optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)

    def firing_rate(self, x):
        out = 0.0
        for _ in range(self.cfg.T):
            out = out + self.model(x)
        return out / self.cfg.T

    def train_one_epoch(self, loader):
        self.model.train()
        total, correct = 0.0, 0
        for x, y in loader:
            rate = self.firing_rate(x)
            loss = F.mse_loss(rate, F.one_hot(y, 4).float())
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total += loss.item()
            correct += (rate.argmax(1) == y).sum().item()
        return total / len(loader), correct

    @torch.no_grad()
    def evaluate(self, loader):
        self.model.eval()
        correct = 0
        for x, y in loader:
            correct += (self.firing_rate(x).argmax(1) == y).sum().item()
            reset_net(self.model)
        return correct


cfg = Config()
model = SpikingMLP()
trainer = Trainer(model, cfg)
data = make_data(cfg)
for epoch in range(cfg.epochs):
    loss, correct = trainer.train_one_epoch(data)
    acc = trainer.evaluate(data[:4])
    print(f"epoch {epoch}: loss {loss:.4f} train-correct {correct} eval-correct {acc}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
