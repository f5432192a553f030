"""BYOL self-supervised pre-training of a small MLP encoder: online network with a
predictor, EMA target network, and a Trainer that drives the loop through a tiny
accelerator-style wrapper."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)


def MLP(dim, projection_size, hidden_size=32):
    return nn.Sequential(nn.Linear(dim, hidden_size), nn.BatchNorm1d(hidden_size), nn.ReLU(inplace=True),
                         nn.Linear(hidden_size, projection_size))


class EMA:
    def __init__(self, beta):
        self.beta = beta

    def update_average(self, old, new):
        return old * self.beta + (1 - self.beta) * new


def loss_fn(x, y):
    x = F.normalize(x, dim=-1, p=2)
    y = F.normalize(y, dim=-1, p=2)
    return 2 - 2 * (x * y).sum(dim=-1)


class BYOL(nn.Module):
    def __init__(self, net, in_dim=16, projection_size=8, moving_average_decay=0.9):
        super().__init__()
        self.online_encoder = nn.Sequential(net, MLP(32, projection_size))
        self.online_predictor = MLP(projection_size, projection_size)
        self.target_encoder = copy.deepcopy(self.online_encoder)
        for p in self.target_encoder.parameters():
            p.requires_grad = False
        self.target_ema_updater = EMA(moving_average_decay)

    @torch.no_grad()
    def update_moving_average(self):
        for cur, ma in zip(self.online_encoder.parameters(), self.target_encoder.parameters()):
            ma.data = self.target_ema_updater.update_average(ma.data, cur.data)

    def forward(self, view_one, view_two):
        online_pred_one = self.online_predictor(self.online_encoder(view_one))
        online_pred_two = self.online_predictor(self.online_encoder(view_two))
        with torch.no_grad():
            target_proj_one = self.target_encoder(view_one)
            target_proj_two = self.target_encoder(view_two)
        loss = loss_fn(online_pred_one, target_proj_two) + loss_fn(online_pred_two, target_proj_one)
        return loss.mean()


class Accelerator:
    """Stand-in for a distributed/mixed-precision launcher (single process here)."""

    def backward(self, loss):
        loss.backward()

    def print(self, *args):
        print(*args)


class BYOLTrainer:
    def __init__(self, net, dataset, batch_size=32, lr=3e-3):
        self.byol = BYOL(net)
        self.optimizer = torch.optim.Adam(self.byol.parameters(), lr=lr)
        self.accelerator = Accelerator()
        self.dataset, self.batch_size = dataset, batch_size

    @staticmethod
    def augment(x):
        return x * (1 + 0.2 * torch.randn_like(x)) + 0.1 * torch.randn_like(x)

    def forward(self, num_train_steps):
        for step in range(num_train_steps):
            idx = torch.randint(0, self.dataset.size(0), (self.batch_size,))
            images = self.dataset[idx]
            loss = self.byol(self.augment(images), self.augment(images))
            self.accelerator.backward(loss)
            self.optimizer.step()
            self.byol.update_moving_average()
            if step % 40 == 0:
                self.accelerator.print(f"step {step}: loss {loss.item():.4f}")


centers = torch.randn(4, 16) * 2
data = centers[torch.randint(0, 4, (512,))] + 0.3 * torch.randn(512, 16)
encoder = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32))
trainer = BYOLTrainer(encoder, data)
trainer.forward(160)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(trainer.byol.online_encoder, trainer.byol.online_predictor):.8f}")
