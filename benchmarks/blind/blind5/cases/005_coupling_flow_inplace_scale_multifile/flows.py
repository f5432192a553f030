"""Tiny normalizing-flow building blocks (affine coupling, permutation, standard-normal base)."""
import math

import torch
import torch.nn as nn


class ResidualConditioner(nn.Module):
    def __init__(self, in_features, out_features, hidden_features=32):
        super().__init__()
        self.hidden_features = hidden_features
        self.initial = nn.Linear(in_features, hidden_features)
        self.block = nn.Sequential(nn.ReLU(), nn.Linear(hidden_features, hidden_features), nn.ReLU(),
                                   nn.Linear(hidden_features, hidden_features))
        self.final = nn.Linear(hidden_features, out_features)

    def forward(self, x):
        h = self.initial(x)
        h = h + self.block(h)
        return self.final(torch.relu(h))


class AffineCoupling(nn.Module):
    """y_b = x_b * exp(s(x_a)) + t(x_a); log-scales soft-clamped to (-clamp, clamp)."""

    def __init__(self, features, mask, hidden_features=32, clamp=2.0):
        super().__init__()
        self.register_buffer("mask", mask)
        n_id = int(mask.sum())
        self.n_transform = features - n_id
        self.transform_net = ResidualConditioner(n_id, 2 * self.n_transform, hidden_features)
        self.clamp = clamp

    def forward(self, x):
        x_id, x_tr = x[:, self.mask.bool()], x[:, ~self.mask.bool()]
        params = self.transform_net(x_id)
        unconstrained_scale, shift = params[:, :self.n_transform], params[:, self.n_transform:]
        log_scale = torch.tanh(unconstrained_scale / self.clamp)
        log_scale *= self.clamp
        y_tr = x_tr * torch.exp(log_scale) + shift
        y = torch.empty_like(x)
        y[:, self.mask.bool()] = x_id
        y[:, ~self.mask.bool()] = y_tr
        return y, log_scale.sum(1)


class ReversePermutation(nn.Module):
    def forward(self, x):
        return x.flip(1), x.new_zeros(x.size(0))


class Flow(nn.Module):
    def __init__(self, transforms):
        super().__init__()
        self.transforms = nn.ModuleList(transforms)

    def log_prob(self, x):
        logdet = x.new_zeros(x.size(0))
        for t in self.transforms:
            x, ld = t(x)
            logdet = logdet + ld
        base = -0.5 * (x ** 2).sum(1) - 0.5 * x.size(1) * math.log(2 * math.pi)
        return base + logdet
