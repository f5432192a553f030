"""Multi-label chest-scan-style classifier (one binary head per finding) trained with
sharpness-aware minimisation: one ascent pass to the perturbed weights, one descent pass there."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

NUM_TASKS = 3


class SAM(torch.optim.Optimizer):
    """Two-pass optimizer: first_step moves to w + rho * g / |g|, second_step returns to w and
    applies the base optimizer with the gradient taken at the perturbed point."""

    def __init__(self, params, base_optimizer_cls, rho=0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer_cls(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        norm = torch.norm(torch.stack([p.grad.norm(2) for g in self.param_groups for p in g["params"]
                                       if p.grad is not None]), 2)
        for group in self.param_groups:
            scale = group["rho"] / (norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                e_w = p.grad * scale
                p.add_(e_w)
                self.state[p]["e_w"] = e_w
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if "e_w" in self.state[p]:
                    p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()


class MultiFindingNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(20, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU())
        self.heads = nn.ModuleList(nn.Linear(48, 1) for _ in range(NUM_TASKS))

    def forward(self, x):
        h = self.backbone(x)
        return [head(h).squeeze(1) for head in self.heads]


def get_loss(output, target, t):
    logits = output[t]
    loss_t = F.binary_cross_entropy_with_logits(logits, target[:, t])
    acc_t = ((logits > 0).float() == target[:, t]).float().mean()
    return loss_t, acc_t


def accumulate_task_losses(output, target, loss, loss_sum, acc_sum):
    for t in range(NUM_TASKS):
        loss_t, acc_t = get_loss(output, target, t)
        loss = loss + loss_t
        loss_sum[t] += loss_t.item()
        acc_sum[t] += acc_t.item()
    return loss


def make_batches(n=16, bs=32):
    w = torch.randn(20, NUM_TASKS)
    out = []
    for _ in range(n):
        x = torch.randn(bs, 20)
        out.append((x, (x @ w > 0.3).float()))
    return out


model = MultiFindingNet()
optimizer = SAM(model.parameters(), torch.optim.SGD, rho=0.05, lr=0.05, momentum=0.9)
batches = make_batches()

for epoch in range(3):
    loss_sum, acc_sum = [0.0] * NUM_TASKS, [0.0] * NUM_TASKS
    for image, target in batches:
        output = model(image)
        loss = accumulate_task_losses(output, target, 0.0, loss_sum, acc_sum)
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.first_step(zero_grad=True)

        output = model(image)
        loss = accumulate_task_losses(output, target, loss, loss_sum, acc_sum)
        loss.backward()
        optimizer.second_step(zero_grad=True)
    n = 2 * len(batches)
    print(f"epoch {epoch}: " + " ".join(f"t{t} loss {loss_sum[t] / n:.4f} acc {acc_sum[t] / n:.3f}" for t in range(NUM_TASKS)))


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
