"""Multi-task tabular model (classification + denoising reconstruction) trained with trainer.Trainer."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from trainer import Trainer as _BaseTrainer


class Trainer(_BaseTrainer):
    def _train_microbatch(self, batch):
        outputs = self.model(batch)
        losses = self.model.loss(outputs, batch)
        if isinstance(losses, (tuple, list)):
            total_loss = 0.0
            for loss in losses:
                loss.backward(retain_graph=True)
                total_loss += loss.item()
            return total_loss
        else:
            losses.backward()
            return losses.item()

torch.manual_seed(0)

N_FEATURES, N_CLASSES, LATENT = 16, 4, 8


class DenoisingClassifier(nn.Module):
    def __init__(self, recon_weight=0.5, noise=0.2):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(N_FEATURES, 32), nn.ReLU(), nn.Linear(32, LATENT), nn.ReLU())
        self.classifier = nn.Linear(LATENT, N_CLASSES)
        self.decoder = nn.Sequential(nn.Linear(LATENT, 32), nn.ReLU(), nn.Linear(32, N_FEATURES))
        self.recon_weight = recon_weight
        self.noise = noise

    def forward(self, batch):
        x, _ = batch
        corrupted = x + self.noise * torch.randn_like(x) if self.training else x
        z = self.encoder(corrupted)
        return {"logits": self.classifier(z), "recon": self.decoder(z)}

    def loss(self, outputs, batch):
        x, y = batch
        ce = F.cross_entropy(outputs["logits"], y)
        rec = F.mse_loss(outputs["recon"], x)
        return ce, self.recon_weight * rec


def make_loader(n_batches=40, bs=32):
    centers = torch.randn(N_CLASSES, N_FEATURES) * 1.5
    batches = []
    for _ in range(n_batches):
        y = torch.randint(0, N_CLASSES, (bs,))
        x = centers[y] + torch.randn(bs, N_FEATURES)
        batches.append((x, y))
    return batches


model = DenoisingClassifier()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
trainer = Trainer(model, optimizer, make_loader(), max_epochs=4, grad_clip_norm=5.0)
trainer.fit()


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
