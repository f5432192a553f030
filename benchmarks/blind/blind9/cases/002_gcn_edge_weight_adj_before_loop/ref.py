"""Node classification with a GCN whose edge weights are learned (sigmoid gates on the edges)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_NODES, N_FEAT, N_CLASS = 60, 8, 3


def make_graph():
    labels = torch.arange(N_NODES) % N_CLASS
    feats = torch.randn(N_NODES, N_FEAT) + F.one_hot(labels, N_FEAT).float() * 0.8
    src, dst = [], []
    g = torch.Generator().manual_seed(3)
    for i in range(N_NODES):
        for j in torch.randint(N_NODES, (4,), generator=g).tolist():
            if i != j:
                src += [i, j]
                dst += [j, i]
    return feats, labels, torch.tensor([src, dst])


class EdgeGatedGCN(nn.Module):
    def __init__(self, edge_index, n_nodes, in_dim, hid, out_dim):
        super().__init__()
        self.register_buffer("edge_index", edge_index)
        self.n_nodes = n_nodes
        self.edge_logit = nn.Parameter(torch.zeros(edge_index.size(1)))
        self.lin1 = nn.Linear(in_dim, hid)
        self.lin2 = nn.Linear(hid, out_dim)

    def normalized_adjacency(self):
        """D^-1/2 (A_w + I) D^-1/2 with learned edge gates."""
        row, col = self.edge_index
        w = torch.sigmoid(self.edge_logit)
        adj = torch.zeros(self.n_nodes, self.n_nodes).index_put((row, col), w, accumulate=True)
        adj = adj + torch.eye(self.n_nodes)
        d_inv_sqrt = adj.sum(1).pow(-0.5)
        return d_inv_sqrt[:, None] * adj * d_inv_sqrt[None, :]

    def forward(self, x, adj):
        h = F.relu(adj @ self.lin1(x))
        return adj @ self.lin2(h)


class Trainer:
    def __init__(self, model, feats, labels, lr=0.05):
        self.model = model
        self.feats, self.labels = feats, labels
        self.train_mask = torch.arange(N_NODES) % 2 == 0
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=5e-4)

    def train_step(self):
        self.model.train()
        self.optimizer.zero_grad()
        adj = self.model.normalized_adjacency()  # depends on the learned edge gates: rebuild every step
        out = self.model(self.feats, adj)
        loss = F.cross_entropy(out[self.train_mask], self.labels[self.train_mask])
        loss.backward()
        self.optimizer.step()
        return loss.item()

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        out = self.model(self.feats, self.model.normalized_adjacency())
        return (out.argmax(1) == self.labels)[~self.train_mask].float().mean().item()


feats, labels, edge_index = make_graph()
model = EdgeGatedGCN(edge_index, N_NODES, N_FEAT, 32, N_CLASS)
trainer = Trainer(model, feats, labels)
for epoch in range(60):
    loss = trainer.train_step()
    if epoch % 20 == 0:
        print(f"epoch {epoch}: loss {loss:.4f} val_acc {trainer.evaluate():.3f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
