"""Classifier trained with cross-entropy plus a penalty on the norm of the end-to-end
input-output Jacobian (a smoothness / robustness regulariser)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

IN_DIM, N_CLASSES = 10, 3


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN_DIM, 64)
        self.fc2 = nn.Linear(64, 64)
        self.fc3 = nn.Linear(64, N_CLASSES)

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


def end_to_end_jacobian_norm(model_output, model_input, n_proj=1):
    """Frobenius norm of d output / d input, estimated with random projections."""
    sq = 0.0
    for _ in range(n_proj):
        v = torch.randn_like(model_output)
        v = v / v.norm(dim=1, keepdim=True)
        (jv,) = torch.autograd.grad(model_output, model_input, grad_outputs=v, retain_graph=True, create_graph=True)
        sq = sq + jv.pow(2).sum(1).mean() * N_CLASSES / n_proj
    return sq.sqrt()


def loss_fn(model_output, model_input, target, jac_coef=0.5):
    ce = F.cross_entropy(model_output, target)
    jac = end_to_end_jacobian_norm(model_output, model_input, n_proj=2)
    return ce + jac_coef * jac, ce, jac


def train_model(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        train_loss, train_jac = 0.0, 0.0
        for batch_input, batch_target in loader:
            batch_input = batch_input.clone().requires_grad_(True)
            optimizer.zero_grad()
            model_batch_output = model(batch_input)
            loss, ce, jac = loss_fn(model_batch_output, batch_input, batch_target)
            loss.backward()
            optimizer.step()
            train_loss += loss.item()
            train_jac += jac.item()
        print(f"epoch {epoch}: loss {train_loss / len(loader):.4f} jac {train_jac / len(loader):.4f}")


def make_loader(n=25, bs=32):
    w = torch.randn(IN_DIM, N_CLASSES)
    out = []
    for _ in range(n):
        x = torch.randn(bs, IN_DIM)
        out.append((x, (x @ w).argmax(1)))
    return out


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
train_model(model, make_loader(), optimizer, epochs=3)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
