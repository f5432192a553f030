"""Signal enhancement network trained with a pixel (L1) loss and a perceptual loss
computed by a frozen random feature extractor; the step logic lives in train_utils.py."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from train_utils import MultiLossStep as _MultiLossStep

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)

L = 32


class MultiLossStep(_MultiLossStep):
    def __call__(self, losses):
        self.optimizer.zero_grad()
        total = sum(self.weights.get(name, 1.0) * loss for name, loss in losses.items())
        total.backward()
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        self.optimizer.step()
        return {name: loss.item() for name, loss in losses.items()}


class Enhancer(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv1d(1, 12, 5, padding=2), nn.ReLU(),
                                  nn.Conv1d(12, 12, 5, padding=2), nn.ReLU(),
                                  nn.Conv1d(12, 1, 5, padding=2))

    def forward(self, x):
        return x + self.body(x)


class FeatureNet(nn.Module):
    """Frozen feature extractor for the perceptual loss."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Conv1d(1, 8, 7, padding=3), nn.Tanh(), nn.Conv1d(8, 8, 7, padding=3))
        for p in self.parameters():
            p.requires_grad_(False)

    def forward(self, x):
        return self.layers(x)


def make_batches(n=25, bs=16):
    t = torch.linspace(0, 1, L)
    out = []
    for _ in range(n):
        freq = torch.rand(bs, 1) * 6 + 1
        clean = torch.sin(2 * torch.pi * freq * t).unsqueeze(1)
        noisy = clean + 0.3 * torch.randn_like(clean)
        out.append((noisy, clean))
    return out


netG = Enhancer()
feat = FeatureNet()
step = MultiLossStep(torch.optim.Adam(netG.parameters(), lr=2e-3),
                     weights={"pix": 1.0, "perceptual": 0.5}, max_grad_norm=5.0)

batches = make_batches()
for epoch in range(4):
    for noisy, clean in batches:
        gen = netG(noisy)
        loss_pix = F.l1_loss(gen, clean)
        loss_perc = F.mse_loss(feat(gen), feat(clean))
        logs = step({"pix": loss_pix, "perceptual": loss_perc})
    print(f"epoch {epoch}: " + " ".join(f"{k} {v:.4f}" for k, v in logs.items()))


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(netG):.8f}")
