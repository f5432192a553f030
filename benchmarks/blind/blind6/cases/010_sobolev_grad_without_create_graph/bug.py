"""Sobolev training of a surrogate model: the network is fitted to target values and, through its
input gradient, to target directional derivatives."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)


class SurrogateNet(nn.Module):
    def __init__(self, dim=3, hidden=32):
        super().__init__()
        self.lin1 = nn.Linear(dim, hidden)
        self.lin2 = nn.Linear(hidden, hidden)
        self.lin3 = nn.Linear(hidden, 1)

    def forward(self, p):
        h = F.softplus(self.lin1(p))
        h = F.softplus(self.lin2(h))
        return self.lin3(h)

    def value_and_input_grad(self, p):
        p = p.detach().requires_grad_(True)
        value = self(p)
        grad_p = torch.autograd.grad(value.sum(), p, retain_graph=True)[0]
        return value, grad_p


class SobolevTrainer:
    def __init__(self, model, lr=3e-3, weight=1.0):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        self.weight = weight

    def step(self, x, y, dy):
        self.optimizer.zero_grad()
        value, grad_x = self.model.value_and_input_grad(x)
        loss_y = F.mse_loss(value, y)
        loss_dy = F.mse_loss(grad_x.sum(dim=-1, keepdim=True), dy)
        loss = loss_y + self.weight * loss_dy
        loss.backward()
        self.optimizer.step()
        return loss_y.item(), loss_dy.item()


x = torch.randn(256, 3)
y = (5 * torch.sin(x) + 3 * torch.cos(x)).sum(dim=-1, keepdim=True)
dy = (5 * torch.cos(x) - 3 * torch.sin(x)).sum(dim=-1, keepdim=True)
model = SurrogateNet()
trainer = SobolevTrainer(model)
for epoch in range(150):
    loss_y, loss_dy = trainer.step(x, y, dy)
    if epoch % 50 == 0:
        print(f"epoch {epoch}: loss_y {loss_y:.4f} loss_dy {loss_dy:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
