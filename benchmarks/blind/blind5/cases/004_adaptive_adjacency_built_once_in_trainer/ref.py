"""Traffic-style node forecasting with a diffusion GCN whose adaptive adjacency is learned
(Graph WaveNet: A_adp = softmax(relu(E1 @ E2))), plus a fixed distance-based support."""
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_NODES, T_IN, HID = 12, 6, 16


class DiffusionGCN(nn.Module):
    def __init__(self, n_nodes, t_in, hidden, emb_dim=6, order=2):
        super().__init__()
        self.nodevec1 = nn.Parameter(torch.randn(n_nodes, emb_dim) * 0.5)
        self.nodevec2 = nn.Parameter(torch.randn(emb_dim, n_nodes) * 0.5)
        self.order = order
        self.inp = nn.Linear(t_in, hidden)
        self.mix = nn.Linear(hidden * (1 + 2 * order), hidden)
        self.out = nn.Linear(hidden, 1)

    def adaptive_adjacency(self):
        return F.softmax(F.relu(self.nodevec1 @ self.nodevec2), dim=1)

    def forward(self, x, supports):
        # x: (batch, nodes, t_in)
        h = torch.relu(self.inp(x))
        feats = [h]
        for a in supports:
            z = h
            for _ in range(self.order):
                z = torch.einsum("nm,bmh->bnh", a, z)
                feats.append(z)
        h = torch.relu(self.mix(torch.cat(feats, dim=-1)))
        return self.out(h).squeeze(-1)


@dataclass
class TrainState:
    supports: list = field(default_factory=list)
    step: int = 0


class Engine:
    def __init__(self, model, fixed_adj, lr=5e-3):
        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-4)
        self.state = TrainState()
        self.state.supports = [fixed_adj]

    def train_step(self, x, y):
        self.model.train()
        self.optimizer.zero_grad()
        pred = self.model(x, self.state.supports + [self.model.adaptive_adjacency()])
        loss = F.l1_loss(pred, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)
        self.optimizer.step()
        self.state.step += 1
        return loss.item()


def make_graph_and_data(n_batches=25, bs=16):
    pos = torch.rand(N_NODES, 2)
    dist = torch.cdist(pos, pos)
    adj = torch.exp(-(dist / 0.3) ** 2)
    adj = adj / adj.sum(1, keepdim=True)
    series = torch.zeros(n_batches * bs, N_NODES, T_IN + 1)
    series[..., 0] = torch.randn(n_batches * bs, N_NODES)
    for t in range(1, T_IN + 1):
        series[..., t] = 0.7 * series[..., t - 1] @ adj.t() + 0.3 * torch.randn(n_batches * bs, N_NODES)
    batches = [(series[i * bs:(i + 1) * bs, :, :T_IN], series[i * bs:(i + 1) * bs, :, T_IN]) for i in range(n_batches)]
    return adj, batches


fixed_adj, batches = make_graph_and_data()
model = DiffusionGCN(N_NODES, T_IN, HID)
engine = Engine(model, fixed_adj)
for epoch in range(4):
    losses = [engine.train_step(x, y) for x, y in batches]
    print(f"epoch {epoch}: mae {sum(losses) / len(losses):.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
