"""YOLO-style grid detector on synthetic images: box / objectness / class losses, a trainer that
accumulates per-component epoch losses and a progress logger that keeps their history."""
from collections import defaultdict

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_CLS, GRID, IMG = 3, 4, 16


class TinyYOLO(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.SiLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.SiLU(), nn.MaxPool2d(2))
        self.head = nn.Conv2d(32, 5 + N_CLS, 1)

    def forward(self, x):
        return self.head(self.backbone(x))  # [B, 5 + C, GRID, GRID]


class YOLOLoss:
    def __init__(self, box_weight=5.0, obj_weight=1.0, cls_weight=0.5):
        self.weights = {"BoxLoss": box_weight, "ObjLoss": obj_weight, "ClsLoss": cls_weight}

    def __call__(self, preds, targets):
        obj_mask = targets[:, 0] > 0
        box = F.mse_loss(torch.sigmoid(preds[:, 1:5]).permute(0, 2, 3, 1)[obj_mask],
                         targets[:, 1:5].permute(0, 2, 3, 1)[obj_mask])
        obj = F.binary_cross_entropy_with_logits(preds[:, 0], targets[:, 0])
        cls = F.cross_entropy(preds[:, 5:].permute(0, 2, 3, 1)[obj_mask], targets[:, 5].long()[obj_mask])
        loss_dict = {"BoxLoss": box, "ObjLoss": obj, "ClsLoss": cls}
        total = sum(self.weights[k] * v for k, v in loss_dict.items())
        return total, loss_dict


class ProgressLogger:
    def __init__(self):
        self.history = []

    def finish_one_epoch(self, epoch, loss_dict, n_samples):
        epoch_losses = {name: value / n_samples for name, value in loss_dict.items()}
        self.history.append(epoch_losses)
        print(f"epoch {epoch}: " + " ".join(f"{k} {float(v):.4f}" for k, v in epoch_losses.items()))


class ModelTrainer:
    def __init__(self, model, loss_fn, progress):
        self.model = model
        self.loss_fn = loss_fn
        self.progress = progress
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)

    def train_one_batch(self, images, targets):
        self.optimizer.zero_grad()
        preds = self.model(images)
        loss, loss_item = self.loss_fn(preds, targets)
        loss.backward()
        self.optimizer.step()
        return loss, loss_item

    def train_one_epoch(self, dataloader):
        self.model.train()
        total_loss = defaultdict(lambda: torch.tensor(0.0))
        total_samples = 0
        for batch_size, images, targets in dataloader:
            _, loss_each = self.train_one_batch(images, targets)
            for loss_name, loss_val in loss_each.items():
                total_loss[loss_name] += loss_val * batch_size
            total_samples += batch_size
        return total_loss, total_samples

    def solve(self, dataloader, epochs=4):
        for epoch in range(epochs):
            epoch_loss, n = self.train_one_epoch(dataloader)
            self.progress.finish_one_epoch(epoch, epoch_loss, n)


def make_loader(n_batches=20, bs=16):
    batches = []
    for _ in range(n_batches):
        images = 0.1 * torch.randn(bs, 1, IMG, IMG)
        targets = torch.zeros(bs, 6, GRID, GRID)
        for b in range(bs):
            for _ in range(2):
                gy, gx = int(torch.randint(0, GRID, ())), int(torch.randint(0, GRID, ()))
                c = int(torch.randint(0, N_CLS, ()))
                cy, cx, h, w = torch.rand(4).tolist()
                targets[b, :, gy, gx] = torch.tensor([1.0, cy, cx, h, w, float(c)])
                y0, x0 = gy * 4, gx * 4
                images[b, 0, y0:y0 + 1 + int(3 * h), x0:x0 + 1 + int(3 * w)] += 1.0 + c
        batches.append((bs, images, targets))
    return batches


model = TinyYOLO()
ModelTrainer(model, YOLOLoss(), ProgressLogger()).solve(make_loader())


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
