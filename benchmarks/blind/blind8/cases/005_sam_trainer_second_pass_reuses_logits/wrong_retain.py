"""Sharpness-aware minimisation (two forward/backward passes per batch) for a small
classifier, with the SAM wrapper written out and a Trainer that owns the step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        defaults = dict(rho=rho, **kwargs)
        super().__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = torch.norm(torch.stack([p.grad.norm(2) for g in self.param_groups
                                            for p in g["params"] if p.grad is not None]), 2)
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                e_w = p.grad * scale
                p.add_(e_w)  # climb to the local worst case w + e(w)
                self.state[p]["e_w"] = e_w
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.sub_(self.state[p]["e_w"])  # back to w
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3))

    def forward(self, x):
        return self.body(x)


class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.05, momentum=0.9)
        self.criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    def _sharpness_pass(self, logits, targets):
        # second forward-backward pass, at the perturbed weights
        self.criterion(logits, targets).backward()
        self.optimizer.second_step(zero_grad=True)

    def train_step(self, inputs, targets):
        logits = self.model(inputs)
        loss = self.criterion(logits, targets)  # use this loss for any training statistics
        loss.backward(retain_graph=True)
        self.optimizer.first_step(zero_grad=True)
        self._sharpness_pass(logits, targets)
        acc = (logits.argmax(1) == targets).double().mean().item()
        return loss.item(), acc


def make_batches(n=20, bs=32):
    w = torch.randn(10, 3)
    out = []
    for _ in range(n):
        x = torch.randn(bs, 10)
        out.append((x, (x @ w + 0.3 * torch.randn(bs, 3)).argmax(1)))
    return out


model = Net()
trainer = Trainer(model)
batches = make_batches()
for epoch in range(4):
    stats = [trainer.train_step(x, y) for x, y in batches]
    print(f"epoch {epoch}: loss {sum(s[0] for s in stats) / len(stats):.4f} acc {sum(s[1] for s in stats) / len(stats):.3f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
