"""Semantic scene completion on voxel columns: the model returns a dict of loss terms; the train and
validation loops keep per-term running averages for the logs."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_CLASSES = 5


class CompletionNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv1d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv1d(16, 16, 3, padding=1), nn.ReLU())
        self.occupancy_head = nn.Conv1d(16, 1, 1)
        self.semantic_head = nn.Conv1d(16, N_CLASSES, 1)

    def forward(self, x):
        h = self.encoder(x)
        return self.occupancy_head(h).squeeze(1), self.semantic_head(h)

    def compute_loss(self, scores, data):
        occ_logits, sem_logits = scores
        loss = {}
        loss["occupancy"] = F.binary_cross_entropy_with_logits(occ_logits, data["occupied"])
        loss["semantic"] = F.cross_entropy(sem_logits, data["labels"])
        loss["smooth"] = 0.1 * (occ_logits[:, 1:] - occ_logits[:, :-1]).abs().mean()
        loss_total = 0.0
        for key in loss:
            loss_total += loss[key]
        loss["total"] = loss_total
        return loss


def make_split(n, bs=16, length=24):
    out = []
    for _ in range(n):
        labels = torch.randint(0, N_CLASSES, (bs, 1)).repeat(1, length)
        labels[:, length // 2:] = 0
        sparse = (labels > 0).float() * (torch.rand(bs, length) < 0.4).float()
        out.append({"input": sparse[:, None], "occupied": (labels > 0).float(), "labels": labels})
    return out


def update_meters(meters, loss):
    for key in loss:
        meters[key] = meters.get(key, 0.0) + loss[key].item()


model = CompletionNet()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
train_set, val_set = make_split(20), make_split(5)
for epoch in range(3):
    model.train()
    train_meters = {}
    for data in train_set:
        scores = model(data["input"])
        loss = model.compute_loss(scores, data)
        optimizer.zero_grad()
        loss["total"].backward()
        optimizer.step()
        update_meters(train_meters, loss)
    model.eval()
    val_meters = {}
    with torch.no_grad():
        for data in val_set:
            update_meters(val_meters, model.compute_loss(model(data["input"]), data))
    print(f"epoch {epoch}: " + " ".join(f"{k} {v / len(train_set):.4f}" for k, v in train_meters.items())
          + f" | val total {val_meters['total'] / len(val_set):.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
