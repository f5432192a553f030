"""Fit a tensor-train (TT) decomposition to a dense 3-way array by gradient descent on the cores,
with a tntorch-style ``optimize`` helper (convergence test on the loss history, progress callback)."""
import time

import torch

torch.manual_seed(0)


class TTensor(torch.nn.Module):
    def __init__(self, shape, ranks):
        super().__init__()
        r = [1] + list(ranks) + [1]
        self.cores = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.randn(r[i], n, r[i + 1]) / (r[i] * r[i + 1]) ** 0.25) for i, n in enumerate(shape)])

    def full(self):
        out = self.cores[0]
        for core in self.cores[1:]:
            out = torch.einsum("...a,abc->...bc", out, core)
        return out.squeeze(0).squeeze(-1)


class ProgressTracker:
    def __init__(self, every=50):
        self.every, self.records = every, []

    def __call__(self, info):
        self.records.append(info)
        if info["iter"] % self.every == 0:
            print(f"iter {info['iter']}: loss {float(info['loss']):.6f} rel-change {float(info['delta']):.3e}")


def optimize(params, loss_function, optimizer=None, tol=1e-9, max_iter=400, callback=None):
    if optimizer is None:
        optimizer = torch.optim.Adam(params, lr=0.02)
    loss_history = []
    start = time.time()
    for it in range(max_iter):
        optimizer.zero_grad()
        loss = loss_function()
        loss.backward()
        optimizer.step()
        loss_history.append(loss.item())
        delta = abs(loss_history[-1] - loss_history[-2]) / loss_history[-2] if it > 0 else 1.0
        if callback is not None:
            callback({"iter": it, "loss": loss, "delta": delta, "elapsed": time.time() - start})
        if it > 0 and delta < tol:
            break
    return loss_history


def smooth_target(shape=(10, 9, 8)):
    i, j, k = [torch.linspace(0, 1, n) for n in shape]
    return torch.sin(3 * i[:, None, None] + 2 * j[None, :, None] * k[None, None, :]) + 0.3 * torch.cos(5 * k)[None, None, :]


target = smooth_target()
tt = TTensor(target.shape, ranks=(4, 4))
history = optimize(list(tt.parameters()), lambda: torch.mean((tt.full() - target) ** 2), callback=ProgressTracker())
print(f"final loss {float(history[-1]):.6e} after {len(history)} iterations")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(tt):.8f}")
