"""Tiny MLP regressor whose linear layers simulate FP8 weight quantisation with delayed scaling
(a rolling amax history per layer, as in FP8 training recipes)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

E4M3_MAX = 448.0


def fake_quantize(w, scale):
    """Round w * scale to the integer grid and scale back; straight-through estimator."""
    ws = w * scale
    q = ws + (torch.round(ws) - ws).detach()
    return q / scale


class Fp8Linear(nn.Module):
    def __init__(self, in_features, out_features, history_len=4):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) / in_features ** 0.5)
        self.bias = nn.Parameter(torch.zeros(out_features))
        self.register_buffer("amax_history", torch.zeros(history_len))
        self.scale = torch.tensor(1.0)

    def update_scaling_factor(self):
        amax = self.weight.abs().max()
        history = torch.roll(self.amax_history, shifts=1)
        history[0] = amax
        self.amax_history = history
        self.scale = (E4M3_MAX / 64.0) / self.amax_history.max().clamp(min=1e-6)

    def forward(self, x):
        if self.training:
            self.update_scaling_factor()
        return F.linear(x, fake_quantize(self.weight, self.scale), self.bias)


class QuantMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = Fp8Linear(8, 32)
        self.fc2 = Fp8Linear(32, 32)
        self.fc3 = Fp8Linear(32, 1)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x))))).squeeze(-1)


def make_data(n=512):
    x = torch.randn(n, 8)
    y = torch.sin(x[:, 0]) + 0.5 * x[:, 1] * x[:, 2] - 0.3 * x[:, 3] ** 2
    return x, y


def train(model, x, y, epochs=6, bs=64):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    model.train()
    for epoch in range(epochs):
        running = 0.0
        for i in range(0, x.size(0), bs):
            pred = model(x[i:i + bs])
            loss = F.mse_loss(pred, y[i:i + bs])
            opt.zero_grad()
            loss.backward(retain_graph=True)
            opt.step()
            running += loss.item()
        print(f"epoch {epoch}: loss {running / (x.size(0) // bs):.5f}")


model = QuantMLP()
x, y = make_data()
train(model, x, y)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
