"""Double-backpropagation regulariser: cross-entropy plus a penalty on the gradient of the
loss w.r.t. the input, computed in a helper with create_graph=True."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def input_gradient_penalty(loss, inputs):
    (grad_x,) = torch.autograd.grad(loss, inputs, create_graph=True)
    return grad_x.pow(2).sum(1).mean()


def train_step(model, optimizer, x, y, lam=0.3):
    x = x.clone().requires_grad_(True)
    optimizer.zero_grad()
    logits = model(F.normalize(x, dim=1) * 3)
    l = F.cross_entropy(logits, y)
    penalty = input_gradient_penalty(l, x)
    L = l + lam * penalty
    L.backward()
    optimizer.step()
    return l.item(), penalty.item()


model = nn.Sequential(nn.Linear(10, 48), nn.Softplus(), nn.Linear(48, 48), nn.Softplus(), nn.Linear(48, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
w = torch.randn(10, 4)
for epoch in range(3):
    ce_sum = pen_sum = 0.0
    for _ in range(25):
        x = torch.randn(32, 10)
        ce, pen = train_step(model, optimizer, x, (x @ w).argmax(1))
        ce_sum += ce
        pen_sum += pen
    print(f"epoch {epoch}: ce {ce_sum / 25:.4f} grad penalty {pen_sum / 25:.5f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
