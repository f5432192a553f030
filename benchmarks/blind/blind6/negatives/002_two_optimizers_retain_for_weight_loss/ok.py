"""Classifier trained with a background-resampling weight network: the weight network scores each
sample from the shared features; the classifier loss is re-weighted by the (detached) scores."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(12, 48), nn.ReLU(), nn.Linear(48, 32), nn.ReLU())
        self.classifier = nn.Linear(32, 4)

    def forward(self, x):
        feats = self.features(x)
        return feats, self.classifier(feats)


class Trainer:
    def __init__(self):
        self.model = Backbone()
        self.weight_net = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 1))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.optimizer_w = torch.optim.Adam(self.weight_net.parameters(), lr=3e-3)

    def train_batch(self, x, y, is_fg):
        feats, logits = self.model(x)
        w = torch.sigmoid(self.weight_net(feats)).squeeze(1)
        ce = F.cross_entropy(logits, y, reduction="none")
        weights = w.detach()
        loss = (weights * ce).sum() / weights.sum()
        loss_w = F.binary_cross_entropy(w, is_fg)

        self.optimizer.zero_grad()
        self.optimizer_w.zero_grad()
        loss.backward(retain_graph=True)
        loss_w.backward()
        self.optimizer.step()
        self.optimizer_w.step()
        return loss.item(), loss_w.item()


def make_batches(n=20, bs=48):
    proto = torch.randn(4, 12)
    out = []
    for _ in range(n):
        y = torch.randint(0, 4, (bs,))
        is_fg = (torch.rand(bs) < 0.6).float()
        x = proto[y] * is_fg[:, None] + torch.randn(bs, 12) * (1.5 - is_fg[:, None])
        out.append((x, y, is_fg))
    return out


trainer = Trainer()
batches = make_batches()
for epoch in range(3):
    tot, tot_w = 0.0, 0.0
    for x, y, is_fg in batches:
        l, lw = trainer.train_batch(x, y, is_fg)
        tot, tot_w = tot + l, tot_w + lw
    print(f"epoch {epoch}: cls {tot / len(batches):.4f} weight {tot_w / len(batches):.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(trainer.model, trainer.weight_net):.8f}")
