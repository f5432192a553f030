"""Keras-style custom model: fit() drives a user-defined train_step() with a loss tracker."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Mean:
    def __init__(self, name):
        self.name, self.total, self.count = name, 0.0, 0

    def update_state(self, value):
        self.total += value
        self.count += 1

    def result(self):
        return self.total / max(self.count, 1)

    def reset_state(self):
        self.total, self.count = 0.0, 0


class CustomModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense1 = nn.Linear(12, 48)
        self.dense2 = nn.Linear(48, 4)
        self.loss_tracker = Mean(name="loss")
        self.optimizer = None

    def compile(self, optimizer):
        self.optimizer = optimizer

    def forward(self, x):
        return self.dense2(F.relu(self.dense1(x)))

    def compute_loss(self, y_pred, y):
        return F.cross_entropy(y_pred, y)

    def train_step(self, data):
        x, y = data
        y_pred = self(x)
        loss = self.compute_loss(y_pred, y)
        loss.backward()
        trainable_weights = [v for v in self.parameters()]
        gradients = [v.grad for v in trainable_weights]
        with torch.no_grad():
            self.optimizer.step()
        self.optimizer.zero_grad()
        self.loss_tracker.update_state(loss.item())
        return {"loss": self.loss_tracker.result(), "grad_norm": float(sum(g.norm() for g in gradients))}

    def fit(self, batches, epochs):
        for epoch in range(epochs):
            self.loss_tracker.reset_state()
            for data in batches:
                logs = self.train_step(data)
            print(f"epoch {epoch}: " + ", ".join(f"{k} {v:.4f}" for k, v in logs.items()))


def make_batches(n=30, bs=32):
    w = torch.randn(12, 4)
    out = []
    for _ in range(n):
        x = torch.randn(bs, 12)
        out.append((x, (x @ w).argmax(1)))
    return out


model = CustomModel()
model.compile(torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9))
model.fit(make_batches(), epochs=3)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
