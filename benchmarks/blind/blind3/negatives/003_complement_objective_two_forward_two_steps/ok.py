"""Complement Objective Training (COT): each batch is used for two updates, a primary
cross-entropy step and a complement-entropy step that flattens the non-target probabilities."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_CLASSES = 5


class ComplementEntropy(nn.Module):
    def forward(self, logits, y):
        probs = F.softmax(logits, dim=1)
        y_g = probs.gather(1, y[:, None])
        px = probs / (1 - y_g + 1e-7)
        log_px = torch.log(px + 1e-10)
        mask = torch.ones_like(probs).scatter_(1, y[:, None], 0.0)
        entropy = (px * log_px * mask).sum(1)
        return entropy.mean() / (N_CLASSES - 1)


def train_epoch(net, batches, optimizer, complement_optimizer, criterion, complement_criterion):
    net.train()
    train_loss = 0.0
    for inputs, targets in batches:
        # primary objective
        outputs = net(inputs)
        loss = criterion(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        train_loss += loss.item()
        # complement objective on a fresh forward pass with the updated weights
        outputs = net(inputs)
        loss = complement_criterion(outputs, targets)
        complement_optimizer.zero_grad()
        loss.backward()
        complement_optimizer.step()
    return train_loss / len(batches)


def make_batches(n=30, bs=32):
    centers = torch.randn(N_CLASSES, 10) * 1.2
    out = []
    for _ in range(n):
        y = torch.randint(0, N_CLASSES, (bs,))
        out.append((centers[y] + torch.randn(bs, 10), y))
    return out


net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, N_CLASSES))
optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
complement_optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
batches = make_batches()
for epoch in range(4):
    print(f"epoch {epoch}: loss {train_epoch(net, batches, optimizer, complement_optimizer, nn.CrossEntropyLoss(), ComplementEntropy()):.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(net):.8f}")
