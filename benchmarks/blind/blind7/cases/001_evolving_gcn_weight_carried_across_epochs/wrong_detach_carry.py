"""EvolveGCN-O style temporal GNN: a GRU cell evolves the GCN weight matrix from snapshot to snapshot."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

NODES, FEATS, SNAPSHOTS = 10, 5, 6


class EvolvingGraphConv(nn.Module):
    """Graph convolution whose weight is produced by a recurrent cell at every time step."""

    def __init__(self, channels):
        super().__init__()
        self.initial_weight = nn.Parameter(torch.empty(channels, channels))
        nn.init.xavier_uniform_(self.initial_weight)
        self.recurrent_layer = nn.GRUCell(channels, channels)
        self.weight = None  # evolved weight of the previous snapshot

    def forward(self, x, a_hat):
        W = self.initial_weight if self.weight is None else self.weight
        W = self.recurrent_layer(W, W)
        self.weight = W
        return a_hat @ x @ W


class RecurrentGCN(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.recurrent = EvolvingGraphConv(channels)
        self.linear = nn.Linear(channels, 1)

    def forward(self, x, a_hat):
        h = F.relu(self.recurrent(x, a_hat))
        return self.linear(h).squeeze(-1)


def normalized_adjacency(adj):
    adj = adj + torch.eye(adj.size(0))
    d = adj.sum(1).rsqrt()
    return d[:, None] * adj * d[None, :]


def make_snapshots():
    snaps = []
    x = torch.randn(NODES, FEATS)
    for t in range(SNAPSHOTS):
        adj = (torch.rand(NODES, NODES) < 0.3).float()
        adj = ((adj + adj.t()) > 0).float()
        a_hat = normalized_adjacency(adj)
        x = 0.8 * x + 0.2 * torch.randn(NODES, FEATS)
        y = torch.tanh(a_hat @ x).sum(1) * 0.3
        snaps.append((x.clone(), a_hat, y))
    return snaps


dataset = make_snapshots()
model = RecurrentGCN(FEATS)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

for epoch in range(40):
    if model.recurrent.weight is not None:
        model.recurrent.weight = model.recurrent.weight.detach()
    cost = 0
    for time, (x, a_hat, y) in enumerate(dataset):
        y_hat = model(x, a_hat)
        cost = cost + torch.mean((y_hat - y) ** 2)
    cost = cost / (time + 1)
    cost.backward()
    optimizer.step()
    optimizer.zero_grad()
    if epoch % 10 == 0:
        print(f"epoch {epoch}: MSE {cost.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
