"""Feedback super-resolution network (SRFBN-style): the same feedback block is unrolled for
several steps, each step emits an SR estimate, and every step's loss is backpropagated
(curriculum weights per step)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

SCALE = 2


class FeedbackBlock(nn.Module):
    def __init__(self, ch=12):
        super().__init__()
        self.compress_in = nn.Conv2d(2 * ch, ch, 1)
        self.body = nn.Sequential(nn.Conv2d(ch, ch, 3, padding=1), nn.PReLU(), nn.Conv2d(ch, ch, 3, padding=1), nn.PReLU())
        self.should_reset = True
        self.last_hidden = None

    def forward(self, x):
        if self.should_reset:
            self.last_hidden = x
            self.should_reset = False
        h = self.compress_in(torch.cat([x, self.last_hidden], 1))
        out = self.body(h)
        self.last_hidden = out
        return out

    def reset_state(self):
        self.should_reset = True


class SRFBN(nn.Module):
    def __init__(self, ch=12, num_steps=4):
        super().__init__()
        self.num_steps = num_steps
        self.conv_in = nn.Sequential(nn.Conv2d(1, ch, 3, padding=1), nn.PReLU())
        self.block = FeedbackBlock(ch)
        self.out = nn.Sequential(nn.Conv2d(ch, SCALE ** 2, 3, padding=1), nn.PixelShuffle(SCALE))

    def forward(self, lr):
        self.block.reset_state()
        base = F.interpolate(lr, scale_factor=SCALE, mode="bilinear", align_corners=False)
        x = self.conv_in(lr)
        outs = []
        for _ in range(self.num_steps):
            h = self.block(x)
            outs.append(base + self.out(h))
        return outs


class SRSolver:
    def __init__(self, model, cl_weights=(0.5, 0.7, 0.85, 1.0)):
        self.model = model
        self.cl_weights = cl_weights
        self.criterion_pix = nn.L1Loss()
        self.optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

    def train_step(self, lr, hr):
        self.model.train()
        self.optimizer.zero_grad()
        outputs = self.model(lr)
        loss_total = 0.0
        n = len(outputs)
        for step, sr in enumerate(outputs):
            loss_step = self.cl_weights[step] * self.criterion_pix(sr, hr)
            # the steps share the feedback graph: keep it until the last step's backward
            loss_step.backward(retain_graph=step < n - 1)
            loss_total += loss_step.item()
        self.optimizer.step()
        return loss_total


def make_pairs(n=16, bs=4, size=16):
    g = torch.linspace(0, 6.28, size)
    out = []
    for _ in range(n):
        f = torch.rand(bs, 1, 1, 1) * 2 + 1
        hr = torch.sin(f * g[None, None, :, None]) * torch.sin(f * g[None, None, None, :])
        out.append((F.avg_pool2d(hr, SCALE), hr))
    return out


model = SRFBN()
solver = SRSolver(model)
for epoch in range(3):
    total = sum(solver.train_step(lr, hr) for lr, hr in make_pairs())
    print(f"epoch {epoch}: loss {total / 16:.5f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
