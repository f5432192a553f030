"""Multi-task regression with PCGrad: each task's gradient on the shared encoder is taken separately,
conflicting components are projected out, and the combined gradient is applied in one optimizer step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

IN_DIM, N_TASKS = 10, 3


class MultiTaskNet(nn.Module):
    def __init__(self, hidden=48):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(IN_DIM, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.heads = nn.ModuleList(nn.Linear(hidden, 1) for _ in range(N_TASKS))

    def forward(self, x):
        z = self.encoder(x)
        return [head(z).squeeze(-1) for head in self.heads]


class GradientSurgery:
    @staticmethod
    def pcgrad(task_grads):
        projected = [g.clone() for g in task_grads]
        for i, g_i in enumerate(projected):
            for j, g_j in enumerate(task_grads):
                if i != j:
                    dot = torch.dot(g_i, g_j)
                    if dot < 0:
                        g_i -= dot / (g_j.norm() ** 2 + 1e-12) * g_j
        return torch.stack(projected).sum(0)


class MultiTaskTrainer:
    def __init__(self, model):
        self.model = model
        self.shared = list(model.encoder.parameters())
        self.optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)

    def train_step(self, x, ys):
        preds = self.model(x)
        losses = [F.mse_loss(p, y) for p, y in zip(preds, ys)]
        self.optimizer.zero_grad()
        task_grads = []
        for i, (loss, head) in enumerate(zip(losses, self.model.heads)):
            head_params = list(head.parameters())
            # every task but the last still needs the shared encoder graph
            grads = torch.autograd.grad(loss, self.shared + head_params, retain_graph=i < len(losses) - 1)
            task_grads.append(torch.cat([g.reshape(-1) for g in grads[:len(self.shared)]]))
            for p, g in zip(head_params, grads[len(self.shared):]):
                p.grad = g
        merged = GradientSurgery.pcgrad(task_grads)
        offset = 0
        for p in self.shared:
            p.grad = merged[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()
        self.optimizer.step()
        return [l.item() for l in losses]


gen = torch.Generator().manual_seed(1)
W = torch.randn(IN_DIM, N_TASKS, generator=gen)
W[:, 1] = -0.8 * W[:, 0] + 0.3 * W[:, 1]  # partially conflicting tasks
trainer = MultiTaskTrainer(MultiTaskNet())
for step in range(150):
    x = torch.randn(64, IN_DIM, generator=gen)
    y = torch.tanh(x @ W)
    losses = trainer.train_step(x, [y[:, t] for t in range(N_TASKS)])
    if step % 50 == 0:
        print(f"step {step}: " + " ".join(f"{l:.4f}" for l in losses))


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(trainer.model):.8f}")
