"""Small character-level language model trained with a Sophia-style optimizer: clipped
pre-conditioned updates, diagonal Hessian EMA refreshed every few steps with the
Gauss-Newton-Bartlett estimator (labels sampled from the model's own predictions)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB, CTX, EMB = 12, 6, 16


class SophiaG(torch.optim.Optimizer):
    def __init__(self, params, lr=3e-3, betas=(0.965, 0.99), rho=0.04, weight_decay=1e-1):
        super().__init__(params, dict(lr=lr, betas=betas, rho=rho, weight_decay=weight_decay))

    @torch.no_grad()
    def update_hessian(self):
        for group in self.param_groups:
            beta2 = group["betas"][1]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "hessian" not in state:
                    state["hessian"] = torch.zeros_like(p)
                state["hessian"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)

    @torch.no_grad()
    def step(self, bs):
        for group in self.param_groups:
            beta1 = group["betas"][0]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "exp_avg" not in state:
                    state["exp_avg"] = torch.zeros_like(p)
                    state.setdefault("hessian", torch.zeros_like(p))
                p.mul_(1 - group["lr"] * group["weight_decay"])
                state["exp_avg"].mul_(beta1).add_(p.grad, alpha=1 - beta1)
                ratio = (state["exp_avg"].abs() / (group["rho"] * bs * state["hessian"] + 1e-15)).clamp(max=1.0)
                p.addcmul_(state["exp_avg"].sign(), ratio, value=-group["lr"])


class CharMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, EMB)
        self.net = nn.Sequential(nn.Linear(CTX * EMB, 64), nn.GELU(), nn.Linear(64, VOCAB))

    def forward(self, idx, targets=None):
        logits = self.net(self.tok(idx).flatten(1))
        loss = None if targets is None else F.cross_entropy(logits, targets)
        return logits, loss


class LMTrainer:
    def __init__(self, model, hess_interval=5, grad_clip=1.0):
        self.model = model
        self.optimizer = SophiaG(model.parameters(), lr=3e-3, rho=0.05)
        self.hess_interval = hess_interval
        self.grad_clip = grad_clip

    def train_step(self, X, Y):
        logits, loss = self.model(X, Y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.grad_clip)
        self.optimizer.step(bs=X.size(0))
        self.optimizer.zero_grad(set_to_none=True)
        return logits, loss.item()

    def update_hessian_ema(self, X, logits):
        # Gauss-Newton-Bartlett: labels sampled from the model's predictive distribution
        logits, _ = self.model(X)
        samp_dist = torch.distributions.Categorical(logits=logits)
        y_sample = samp_dist.sample()
        loss_sampled = F.cross_entropy(logits, y_sample)
        loss_sampled.backward()
        self.optimizer.update_hessian()
        self.optimizer.zero_grad(set_to_none=True)

    def fit(self, batches, epochs=3):
        for epoch in range(epochs):
            total = 0.0
            for it, (X, Y) in enumerate(batches):
                logits, loss = self.train_step(X, Y)
                total += loss
                if it % self.hess_interval == self.hess_interval - 1:
                    self.update_hessian_ema(X, logits)
            print(f"epoch {epoch}: loss {total / len(batches):.4f}")


def make_batches(n=30, bs=32):
    # a noisy periodic "text": next char = (sum of last two chars + 1) mod VOCAB, 10% noise
    seq = [0, 1]
    for _ in range(n * bs + CTX + 1):
        nxt = (seq[-1] + seq[-2] + 1) % VOCAB
        if torch.rand(()) < 0.1:
            nxt = int(torch.randint(0, VOCAB, ()))
        seq.append(nxt)
    data = torch.tensor(seq)
    batches = []
    for b in range(n):
        starts = torch.randint(0, len(seq) - CTX - 1, (bs,))
        X = torch.stack([data[s:s + CTX] for s in starts.tolist()])
        Y = data[starts + CTX]
        batches.append((X, Y))
    return batches


model = CharMLP()
LMTrainer(model).fit(make_batches())


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
