"""Multi-horizon value prediction with a shared trunk; the two losses are backpropagated
separately so that the gradient norm contributed by each can be logged before one step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(8, 48), nn.ReLU(), nn.Linear(48, 48), nn.ReLU())
        self.q_head = nn.Linear(48, 4)
        self.aux_head = nn.Linear(48, 8)

    def forward(self, s):
        h = self.trunk(s)
        return self.q_head(h), self.aux_head(h)


def grad_norm(module):
    return sum(float(p.grad.pow(2).sum()) for p in module.parameters() if p.grad is not None) ** 0.5


def make_transitions(n=30, bs=32):
    A = torch.randn(8, 8) * 0.3
    out = []
    for _ in range(n):
        s = torch.randn(bs, 8)
        a = torch.randint(4, (bs,))
        r = s[:, 0] * (a == 0).float() - s[:, 1] * (a == 1).float()
        out.append((s, a, r, torch.tanh(s @ A)))
    return out


net = QNet()
target = QNet()
target.load_state_dict(net.state_dict())
optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
td_norms, aux_norms = [], []

for epoch in range(3):
    for i, (s, a, r, s_next) in enumerate(make_transitions()):
        optimizer.zero_grad()
        q, pred_next = net(s)
        with torch.no_grad():
            q_next, _ = target(s_next)
            y = r + 0.9 * q_next.max(1).values
        td_loss = F.smooth_l1_loss(q.gather(1, a[:, None]).squeeze(1), y)
        aux_loss = F.mse_loss(pred_next, s_next)

        td_loss.backward(retain_graph=True)  # aux_loss is backpropagated through the same trunk below
        td_norms.append(grad_norm(net.trunk))
        aux_loss.backward()
        aux_norms.append(grad_norm(net.trunk))
        optimizer.step()
        if i % 10 == 0:
            target.load_state_dict(net.state_dict())
    print(f"epoch {epoch}: td {td_loss.item():.4f} aux {aux_loss.item():.4f} trunk grad td {td_norms[-1]:.4f} all {aux_norms[-1]:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(net):.8f}")
