"""LoRA fine-tuning of a frozen MLP classifier with a small Trainer class."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

IN, HID, CLASSES = 12, 32, 4


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank=4, alpha=8.0):
        super().__init__()
        self.base = base
        for p in self.base.parameters():
            p.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.randn(rank, base.in_features) * 0.1)
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank))
        self.scaling = alpha / rank

    def forward(self, x):
        return self.base(x) + (x @ self.lora_a.t() @ self.lora_b.t()) * self.scaling


@dataclass
class TrainingConfig:
    lr: float = 0.05
    epochs: int = 4
    batch_size: int = 16
    max_grad_norm: float = 5.0


class Trainer:
    def __init__(self, model, config: TrainingConfig):
        self.model = model
        self.config = config
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.SGD(params, lr=config.lr, momentum=0.9)

    def optimizer_step(self, zero_grad: bool = False):
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.max_grad_norm)
        self.optimizer.step()
        if zero_grad:
            self.optimizer.zero_grad()

    def training_step(self, x, y):
        self.optimizer.zero_grad()
        logits = self.model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        return loss.item()

    def fit(self, xs, ys):
        n = xs.size(0)
        for epoch in range(self.config.epochs):
            total = 0.0
            for i in range(0, n, self.config.batch_size):
                total += self.training_step(xs[i:i + self.config.batch_size], ys[i:i + self.config.batch_size])
                self.optimizer_step()
            print(f"epoch {epoch}: loss {total / (n // self.config.batch_size):.4f}")


base = nn.Sequential(nn.Linear(IN, HID), nn.ReLU(), nn.Linear(HID, CLASSES))
model = nn.Sequential(LoRALinear(base[0]), nn.ReLU(), LoRALinear(base[2]))
xs = torch.randn(160, IN)
ys = (xs[:, :4].argmax(1) + (xs[:, 4] > 1).long()) % CLASSES
trainer = Trainer(model, TrainingConfig())
trainer.fit(xs, ys)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
