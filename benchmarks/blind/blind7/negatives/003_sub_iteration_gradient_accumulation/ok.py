"""Point-cloud segmentation trainer with sub-iterations: each optimizer step accumulates gradients of
`iter_size` sub-batches (one backward each), zero_grad is called once per step, outside the loop."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

POINTS, FEATS, CLASSES = 64, 4, 3


class PointNetSeg(nn.Module):
    def __init__(self):
        super().__init__()
        self.local = nn.Sequential(nn.Linear(FEATS, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(64, CLASSES)

    def forward(self, pts):
        f = self.local(pts)
        g = f.max(1, keepdim=True).values.expand_as(f)
        return self.head(torch.cat([f, g], -1))


def sub_batches(n):
    out = []
    for _ in range(n):
        pts = torch.randn(2, POINTS, FEATS)
        label = (pts[..., 0] > 0).long() + (pts[..., 1] > 0.8).long()
        out.append((pts, label))
    return out


model = PointNetSeg()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
iter_size = 4
data_iter = iter(sub_batches(30 * iter_size))

for curr_iter in range(30):
    optimizer.zero_grad()
    batch_loss = 0.0
    for sub_iter in range(iter_size):
        coords, target = next(data_iter)
        soutput = model(coords)
        loss = F.cross_entropy(soutput.reshape(-1, CLASSES), target.reshape(-1)) / iter_size
        loss.backward()
        batch_loss += loss.item()
    optimizer.step()
    if curr_iter % 10 == 0:
        print(f"iter {curr_iter}: loss {batch_loss:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
