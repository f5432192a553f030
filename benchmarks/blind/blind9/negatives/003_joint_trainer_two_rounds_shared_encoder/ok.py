"""Joint trainer: one interactive-segmentation round and one automatic-segmentation round per
batch, both updating a shared image encoder (each round has its own forward pass)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class SharedEncoderModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.image_encoder = nn.Sequential(nn.Linear(16, 48), nn.GELU(), nn.Linear(48, 48), nn.GELU())
        self.prompt_encoder = nn.Linear(2, 48)
        self.mask_decoder = nn.Linear(48, 16)
        self.instance_decoder = nn.Linear(48, 16)

    def interactive(self, x, prompts):
        return self.mask_decoder(self.image_encoder(x) + self.prompt_encoder(prompts))

    def automatic(self, x):
        return self.instance_decoder(self.image_encoder(x))


class JointTrainer:
    def __init__(self, model, lr=1e-3):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)

    def _interactive_iteration(self, x, y):
        prompts = torch.stack([y.mean(1), y.std(1)], 1)
        logits = self.model.interactive(x, prompts)
        return F.binary_cross_entropy_with_logits(logits, (y > 0).float())

    def _automatic_iteration(self, x, y):
        return F.mse_loss(self.model.automatic(x), y)

    def train_iteration(self, x, y):
        self.optimizer.zero_grad()
        interactive_loss = self._interactive_iteration(x, y)
        interactive_loss.backward()
        self.optimizer.step()

        self.optimizer.zero_grad()
        ais_loss = self._automatic_iteration(x, y)
        ais_loss.backward()
        self.optimizer.step()
        return interactive_loss.item(), ais_loss.item()


def make_batches(n=30, bs=32):
    w = torch.randn(16, 16) * 0.4
    return [(x, torch.tanh(x @ w)) for x in (torch.randn(bs, 16) for _ in range(n))]


model = SharedEncoderModel()
trainer = JointTrainer(model)
for epoch in range(3):
    logs = [trainer.train_iteration(x, y) for x, y in make_batches()]
    print(f"epoch {epoch}: interactive {sum(l[0] for l in logs) / len(logs):.4f} ais {sum(l[1] for l in logs) / len(logs):.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
