"""1-D denoising-diffusion trainer on multichannel sensor windows. The raw 3-channel windows are
mapped to the network's 4 channels by a fixed (untrained) random Conv1d adapter."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

SEQ_LEN, CHANNELS, RAW_CHANNELS = 16, 4, 3


class SignalWindows:
    """Holds the (adapted) training windows and serves mini-batches."""

    def __init__(self, raw, adapter, batch_size=8):
        self.data = adapter(raw)
        self.batch_size = batch_size

    def __len__(self):
        return self.data.size(0) // self.batch_size

    def batches(self):
        for i in range(len(self)):
            yield self.data[i * self.batch_size:(i + 1) * self.batch_size]


class TinyUnet1D(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.time_mlp = nn.Sequential(nn.Linear(1, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.inp = nn.Conv1d(CHANNELS, dim, 3, padding=1)
        self.mid = nn.Conv1d(dim, dim, 3, padding=1)
        self.out = nn.Conv1d(dim, CHANNELS, 3, padding=1)

    def forward(self, x, t):
        h = F.silu(self.inp(x)) + self.time_mlp(t[:, None].float() / 50)[..., None]
        h = h + F.silu(self.mid(h))
        return self.out(h)


class GaussianDiffusion1D(nn.Module):
    def __init__(self, model, timesteps=50):
        super().__init__()
        self.model = model
        self.timesteps = timesteps
        betas = torch.linspace(1e-4, 0.05, timesteps)
        self.register_buffer("alphas_cumprod", torch.cumprod(1 - betas, dim=0))

    def forward(self, x_start):
        t = torch.randint(0, self.timesteps, (x_start.size(0),))
        noise = torch.randn_like(x_start)
        a = self.alphas_cumprod[t][:, None, None]
        x_t = a.sqrt() * x_start + (1 - a).sqrt() * noise
        return F.mse_loss(self.model(x_t, t), noise)


class Trainer:
    def __init__(self, diffusion, dataset, lr=2e-3):
        self.diffusion = diffusion
        self.dataset = dataset
        self.opt = torch.optim.Adam(diffusion.parameters(), lr=lr)

    def train(self, epochs):
        for epoch in range(epochs):
            total = 0.0
            for batch in self.dataset.batches():
                loss = self.diffusion(batch)
                loss.backward()
                self.opt.step()
                self.opt.zero_grad()
                total += loss.item()
            print(f"epoch {epoch}: loss {total / len(self.dataset):.4f}")


def make_raw(n=64):
    t = torch.linspace(0, 2 * math.pi, SEQ_LEN)
    phase = torch.rand(n, RAW_CHANNELS, 1) * 2 * math.pi
    return torch.sin(t + phase) + 0.05 * torch.randn(n, RAW_CHANNELS, SEQ_LEN)


adapter = nn.Conv1d(RAW_CHANNELS, CHANNELS, 1)
dataset = SignalWindows(make_raw(), adapter)
diffusion = GaussianDiffusion1D(TinyUnet1D())
trainer = Trainer(diffusion, dataset)
trainer.train(4)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(diffusion, adapter):.8f}")
