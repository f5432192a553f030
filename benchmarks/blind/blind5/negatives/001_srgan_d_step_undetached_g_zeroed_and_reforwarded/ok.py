"""Super-resolution GAN on 1-D signals (DBPN main_gan.py layout): the discriminator step feeds the
generator output without detach; the generator gradients are reset and the output recomputed
before the generator step."""
import torch
import torch.nn as nn

torch.manual_seed(0)

LR_LEN, SCALE = 16, 4


class Upsampler(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(LR_LEN, 96), nn.PReLU(), nn.Linear(96, 96), nn.PReLU(),
                                  nn.Linear(96, LR_LEN * SCALE))

    def forward(self, x):
        base = nn.functional.interpolate(x[:, None], scale_factor=SCALE, mode="linear", align_corners=False)[:, 0]
        return base + self.body(x)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(LR_LEN * SCALE, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1), nn.Sigmoid())

    def forward(self, x):
        return self.net(x).squeeze(1)


def make_pairs(n_batches=30, bs=32):
    t = torch.linspace(0, 1, LR_LEN * SCALE)
    out = []
    for _ in range(n_batches):
        f = torch.rand(bs, 1) * 6 + 1
        ph = torch.rand(bs, 1) * 6.28
        hr = torch.sin(2 * 3.14159 * f * t + ph) + 0.3 * torch.sin(7 * 3.14159 * f * t)
        out.append((hr[:, ::SCALE].contiguous(), hr))
    return out


model, D = Upsampler(), Discriminator()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
D_optimizer = torch.optim.Adam(D.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
MSE_loss, BCE_loss = nn.MSELoss(), nn.BCELoss()
w_mse, w_adv = 1.0, 1e-2

for epoch in range(3):
    G_epoch_loss = D_epoch_loss = 0.0
    for input, target in make_pairs():
        real_label, fake_label = torch.ones(input.size(0)), torch.zeros(input.size(0))

        D_optimizer.zero_grad()
        D_real_loss = BCE_loss(D(target), real_label)
        recon_image = model(input)
        D_fake_loss = BCE_loss(D(recon_image), fake_label)
        D_loss = D_real_loss + D_fake_loss
        D_loss.backward()
        D_optimizer.step()

        optimizer.zero_grad()
        recon_image = model(input)
        GAN_loss = w_adv * BCE_loss(D(recon_image), real_label)
        mse_loss = w_mse * MSE_loss(recon_image, target)
        G_loss = mse_loss + GAN_loss
        G_loss.backward()
        optimizer.step()

        G_epoch_loss += G_loss.item()
        D_epoch_loss += D_loss.item()
    print(f"epoch {epoch}: G {G_epoch_loss / 30:.4f} D {D_epoch_loss / 30:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model, D):.8f}")
