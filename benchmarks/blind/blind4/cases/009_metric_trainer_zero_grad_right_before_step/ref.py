"""Metric-learning trainer (contrastive pair loss) with gradient accumulation over several iterations."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

IN_DIM, EMB_DIM, N_CLASSES = 16, 8, 5


class ContrastiveLoss:
    def __init__(self, pos_margin=0.0, neg_margin=1.0):
        self.pos_margin, self.neg_margin = pos_margin, neg_margin

    def __call__(self, emb, labels):
        dist = torch.cdist(emb, emb)
        same = labels[:, None] == labels[None, :]
        eye = torch.eye(len(labels), dtype=torch.bool)
        pos = F.relu(dist[same & ~eye] - self.pos_margin).pow(2)
        neg = F.relu(self.neg_margin - dist[~same]).pow(2)
        return pos.mean() + neg.mean()


class MetricLossOnly:
    def __init__(self, models, optimizers, loss_funcs, data, accumulation_steps=4):
        self.models, self.optimizers, self.loss_funcs = models, optimizers, loss_funcs
        self.data, self.accumulation_steps = data, accumulation_steps
        self.iteration, self.losses = 0, {}

    def zero_losses(self):
        self.losses = {k: 0 for k in self.loss_funcs}

    def zero_grad(self):
        for opt in self.optimizers.values():
            opt.zero_grad()

    def step_optimizers(self):
        for opt in self.optimizers.values():
            opt.step()

    def get_batch(self):
        return self.data[self.iteration % len(self.data)]

    def calculate_loss(self, batch):
        x, labels = batch
        emb = F.normalize(self.models["embedder"](self.models["trunk"](x)), dim=1)
        self.losses["metric_loss"] = self.loss_funcs["metric_loss"](emb, labels)

    def backward(self):
        total = sum(self.losses.values()) / self.accumulation_steps
        total.backward()

    def clip_gradients(self):
        for m in self.models.values():
            nn.utils.clip_grad_norm_(m.parameters(), 5.0)

    def forward_and_backward(self):
        self.zero_losses()
        self.calculate_loss(self.get_batch())
        self.backward()
        self.clip_gradients()
        if (self.iteration + 1) % self.accumulation_steps == 0:
            self.step_optimizers()
            self.zero_grad()

    def train(self, num_iterations):
        for _ in range(num_iterations):
            self.forward_and_backward()
            if self.iteration % 40 == 0:
                print(f"iter {self.iteration}: metric_loss {float(self.losses['metric_loss']):.4f}")
            self.iteration += 1


def make_data(n_batches=16, per_class=6):
    centres = torch.randn(N_CLASSES, IN_DIM) * 1.5
    out = []
    for _ in range(n_batches):
        labels = torch.arange(N_CLASSES).repeat_interleave(per_class)
        out.append((centres[labels] + torch.randn(len(labels), IN_DIM), labels))
    return out


trunk = nn.Sequential(nn.Linear(IN_DIM, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
embedder = nn.Linear(32, EMB_DIM)
optimizers = {"trunk_optimizer": torch.optim.SGD(trunk.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4),
              "embedder_optimizer": torch.optim.SGD(embedder.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)}
trainer = MetricLossOnly({"trunk": trunk, "embedder": embedder}, optimizers,
                         {"metric_loss": ContrastiveLoss()}, make_data())
trainer.train(160)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(trunk, embedder):.8f}")
