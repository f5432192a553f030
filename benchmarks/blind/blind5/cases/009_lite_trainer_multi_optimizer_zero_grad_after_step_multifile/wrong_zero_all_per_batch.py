"""GAN template for the Lite trainer (lite_trainer.py): optimizer 0 trains the generator,
optimizer 1 the discriminator, on every batch (Lightning's GAN example layout)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from lite_trainer import LiteModule
from lite_trainer import LiteTrainer as _LiteTrainer


class LiteTrainer(_LiteTrainer):
    def fit(self, module, dataloader):
        optimizers = module.configure_optimizers()
        for epoch in range(self.max_epochs):
            logs = {i: 0.0 for i in range(len(optimizers))}
            for batch in dataloader:
                for optimizer in optimizers:
                    optimizer.zero_grad()
                for opt_idx, optimizer in enumerate(optimizers):
                    output = module.training_step(batch, opt_idx)
                    output["loss"].backward()
                    optimizer.step()
                    logs[opt_idx] += output["loss"].item() / len(dataloader)
            module.on_epoch_end(epoch, logs)

torch.manual_seed(0)

LATENT, DATA = 6, 5


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(LATENT, 48), nn.LeakyReLU(0.2), nn.Linear(48, 48), nn.LeakyReLU(0.2),
                                   nn.Linear(48, DATA))

    def forward(self, z):
        return self.model(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(DATA, 48), nn.LeakyReLU(0.2), nn.Linear(48, 1))

    def forward(self, x):
        return self.model(x)


class GAN(LiteModule):
    def __init__(self, lr=2e-4, b1=0.5, b2=0.999):
        super().__init__()
        self.generator = Generator()
        self.discriminator = Discriminator()
        self.hparams = dict(lr=lr, b1=b1, b2=b2)

    def adversarial_loss(self, y_hat, y):
        return F.binary_cross_entropy_with_logits(y_hat, y)

    def training_step(self, batch, optimizer_idx):
        real, z = batch
        valid = torch.ones(real.size(0), 1)
        fake = torch.zeros(real.size(0), 1)
        if optimizer_idx == 0:
            self.generated = self.generator(z)
            g_loss = self.adversarial_loss(self.discriminator(self.generated), valid)
            return {"loss": g_loss}
        real_loss = self.adversarial_loss(self.discriminator(real), valid)
        fake_loss = self.adversarial_loss(self.discriminator(self.generated.detach()), fake)
        return {"loss": (real_loss + fake_loss) / 2}

    def configure_optimizers(self):
        h = self.hparams
        opt_g = torch.optim.Adam(self.generator.parameters(), lr=h["lr"], betas=(h["b1"], h["b2"]))
        opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=h["lr"], betas=(h["b1"], h["b2"]))
        return [opt_g, opt_d]

    def on_epoch_end(self, epoch, logs):
        print(f"epoch {epoch}: g_loss {logs[0]:.4f} d_loss {logs[1]:.4f}")


def make_loader(n_batches=40, bs=64):
    mix = torch.randn(DATA, DATA) * 0.6
    out = []
    for _ in range(n_batches):
        real = torch.tanh(torch.randn(bs, DATA) @ mix + 0.5)
        out.append((real, torch.randn(bs, LATENT)))
    return out


gan = GAN()
LiteTrainer(max_epochs=4).fit(gan, make_loader())


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(gan):.8f}")
