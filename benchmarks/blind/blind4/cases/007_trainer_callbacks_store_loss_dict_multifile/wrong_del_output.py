"""Constrained system-identification problem trained by a small Trainer with callbacks (callbacks.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from callbacks import MetricHistory, Printer

torch.manual_seed(0)


class Problem(nn.Module):
    """One-step dynamics model x_{t+1} = f(x_t, u_t) with a soft bound on the predicted state."""

    def __init__(self, nx=4, nu=2, hidden=48):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(nx + nu, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                               nn.Linear(hidden, nx))

    def forward(self, batch):
        x, u, x_next = batch
        pred = x + self.f(torch.cat([x, u], -1))
        ref_loss = F.mse_loss(pred, x_next)
        bound_loss = F.relu(pred.abs() - 1.5).pow(2).mean()
        loss = ref_loss + 0.1 * bound_loss
        return {"loss": loss, "ref_loss": ref_loss, "bound_loss": bound_loss, "pred_max": pred.abs().max()}


class Trainer:
    def __init__(self, problem, data, callbacks, epochs=6, lr=3e-3):
        self.problem, self.data, self.callbacks, self.epochs = problem, data, callbacks, epochs
        self.optimizer = torch.optim.AdamW(problem.parameters(), lr=lr, weight_decay=1e-4)

    def _call(self, hook, *args):
        for cb in self.callbacks:
            getattr(cb, hook)(self, *args)

    def train(self):
        for epoch in range(self.epochs):
            self._call("begin_epoch", epoch)
            for batch in self.data:
                output = self.problem(batch)
                self.optimizer.zero_grad()
                output["loss"].backward()
                self.optimizer.step()
                self._call("end_batch", output)
                del output  # free the batch graph
            self._call("end_epoch", epoch)


def make_data(n_batches=40, bs=32, nx=4, nu=2):
    A = torch.eye(nx) + 0.1 * torch.randn(nx, nx)
    B = 0.3 * torch.randn(nx, nu)
    out = []
    for _ in range(n_batches):
        x, u = torch.randn(bs, nx) * 0.7, torch.randn(bs, nu)
        out.append((x, u, torch.tanh(x @ A.T + u @ B.T)))
    return out


problem = Problem()
history = MetricHistory()
trainer = Trainer(problem, make_data(), [history, Printer(history)])
trainer.train()


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(problem):.8f}")
