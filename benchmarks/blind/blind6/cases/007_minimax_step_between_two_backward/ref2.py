"""Reconstruction-based time-series anomaly detector with an association-discrepancy minimax
objective: a learned series association and a Gaussian prior association per layer."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

WIN, FEAT, DIM = 12, 3, 16


class AssociationLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(DIM, DIM)
        self.k = nn.Linear(DIM, DIM)
        self.v = nn.Linear(DIM, DIM)
        self.sigma = nn.Linear(DIM, 1)
        self.ff = nn.Sequential(nn.Linear(DIM, 32), nn.GELU(), nn.Linear(32, DIM))
        dist = torch.arange(WIN)[:, None] - torch.arange(WIN)[None, :]
        self.register_buffer("dist2", dist.float() ** 2)

    def forward(self, x):
        series = torch.softmax(self.q(x) @ self.k(x).transpose(1, 2) / DIM ** 0.5, dim=-1)
        sigma = F.softplus(self.sigma(x)) + 0.5
        prior = torch.exp(-self.dist2 / (2 * sigma ** 2))
        prior = prior / prior.sum(-1, keepdim=True)
        h = x + series @ self.v(x)
        return h + self.ff(h), series, prior


class AnomalyTransformerLite(nn.Module):
    def __init__(self, layers=2):
        super().__init__()
        self.embed = nn.Linear(FEAT, DIM)
        self.layers = nn.ModuleList(AssociationLayer() for _ in range(layers))
        self.proj = nn.Linear(DIM, FEAT)

    def forward(self, x):
        h = self.embed(x)
        series_list, prior_list = [], []
        for layer in self.layers:
            h, series, prior = layer(h)
            series_list.append(series)
            prior_list.append(prior)
        return self.proj(h), series_list, prior_list


def kl(p, q):
    return (p * (torch.log(p + 1e-4) - torch.log(q + 1e-4))).sum(-1).mean()


class Solver:
    def __init__(self, k=1.0, lr=2e-3):
        self.model = AnomalyTransformerLite()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.k = k

    def association_discrepancy(self, series_list, prior_list):
        series_loss, prior_loss = 0.0, 0.0
        for series, prior in zip(series_list, prior_list):
            series_loss = series_loss + kl(series, prior.detach()) + kl(prior.detach(), series)
            prior_loss = prior_loss + kl(prior, series.detach()) + kl(series.detach(), prior)
        n = len(series_list)
        return series_loss / n, prior_loss / n

    def train(self, loader, epochs):
        for epoch in range(epochs):
            rec_total = 0.0
            for x in loader:
                self.optimizer.zero_grad()
                output, series, prior = self.model(x)
                series_loss, prior_loss = self.association_discrepancy(series, prior)
                rec_loss = F.mse_loss(output, x)
                loss1 = rec_loss - self.k * series_loss
                loss2 = rec_loss + self.k * prior_loss

                # minimax strategy
                loss1.backward()
                self.optimizer.step()

                self.optimizer.zero_grad()
                output, series, prior = self.model(x)
                series_loss, prior_loss = self.association_discrepancy(series, prior)
                rec_loss = F.mse_loss(output, x)
                loss2 = rec_loss + self.k * prior_loss
                loss2.backward()
                self.optimizer.step()
                rec_total += rec_loss.item()
            print(f"epoch {epoch}: rec {rec_total / len(loader):.4f} series {series_loss.item():.4f} prior {prior_loss.item():.4f}")


def make_loader(n=12, bs=8):
    t = torch.arange(WIN).float()
    out = []
    for _ in range(n):
        phase = torch.rand(bs, 1, FEAT) * 6.28
        out.append(torch.sin(0.6 * t[None, :, None] + phase) + 0.05 * torch.randn(bs, WIN, FEAT))
    return out


solver = Solver()
solver.train(make_loader(), 3)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(solver.model):.8f}")
