"""One-stage toy detector (box regression + objectness + class heads) with per-epoch loss statistics."""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class TinyDetector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(20, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU())
        self.box = nn.Linear(64, 4)
        self.obj = nn.Linear(64, 1)
        self.cls = nn.Linear(64, 5)

    def forward(self, x):
        h = self.backbone(x)
        return self.box(h), self.obj(h).squeeze(1), self.cls(h)


def yolo_loss(outputs, targets):
    box, obj, cls = outputs
    t_box, t_obj, t_cls = targets
    loss_loc = F.smooth_l1_loss(box[t_obj > 0], t_box[t_obj > 0])
    loss_conf = F.binary_cross_entropy_with_logits(obj, t_obj)
    loss_cls = F.cross_entropy(cls[t_obj > 0], t_cls[t_obj > 0])
    return loss_loc + loss_conf + loss_cls, (loss_loc, loss_conf, loss_cls)


@dataclass
class EpochStats:
    total_loss: float = 0.0
    loc_loss: float = 0.0
    conf_loss: float = 0.0
    cls_loss: float = 0.0
    iters: int = 0

    def update(self, loss, parts):
        self.total_loss += loss
        self.loc_loss += parts[0]
        self.conf_loss += parts[1]
        self.cls_loss += parts[2]
        self.iters += 1

    def summary(self):
        n = max(self.iters, 1)
        return (f"total {float(self.total_loss) / n:.4f} loc {float(self.loc_loss) / n:.4f} "
                f"conf {float(self.conf_loss) / n:.4f} cls {float(self.cls_loss) / n:.4f}")


def make_dataset(n=40, bs=32):
    wb, wc = torch.randn(20, 4), torch.randn(20, 5)
    out = []
    for _ in range(n):
        x = torch.randn(bs, 20)
        t_obj = (x[:, 0] > 0).float()
        out.append((x, (torch.tanh(x @ wb), t_obj, (x @ wc).argmax(1))))
    return out


def fit_one_epoch(model, optimizer, data, epoch):
    stats = EpochStats()
    model.train()
    for x, targets in data:
        optimizer.zero_grad()
        outputs = model(x)
        loss, parts = yolo_loss(outputs, targets)
        loss.backward()
        optimizer.step()
        stats.update(loss.detach(), [p.detach() for p in parts])
    print(f"epoch {epoch}: {stats.summary()}")
    return stats


model = TinyDetector()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
data = make_dataset()
history = []
for epoch in range(3):
    history.append(fit_one_epoch(model, optimizer, data, epoch))


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
