"""Texture-expansion GAN: the generator is trained with a Gram-matrix style loss, a perceptual
(feature) loss and an adversarial loss, all measured through one frozen feature extractor."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class FrozenFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, stride=2)
        for p in self.parameters():
            p.requires_grad_(False)

    def forward(self, x):
        f1 = F.relu(self.conv1(x))
        return [f1, F.relu(self.conv2(f1))]


def gram(f):
    b, c, h, w = f.shape
    f = f.reshape(b, c, h * w)
    return f @ f.transpose(1, 2) / (c * h * w)


netG = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Upsample(scale_factor=2),
                     nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1), nn.Tanh())
netD = nn.Sequential(nn.Conv2d(1, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4, stride=2, padding=1))
features = FrozenFeatures()
optimizer_G = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
optimizer_D = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
lambda_style, lambda_perc = 50.0, 1.0


def make_texture(bs=4):
    xs = torch.linspace(0, 6.28, 16)
    phase = torch.rand(bs, 1, 1, 1) * 6.28
    big = torch.sin(3 * xs[None, None, :, None] + 2 * xs[None, None, None, :] + phase)
    return F.avg_pool2d(big, 2), big


for it in range(40):
    small, target = make_texture()
    fake = netG(small)

    # discriminator step on the detached fake
    optimizer_D.zero_grad()
    pred_fake = netD(fake.detach())
    pred_real = netD(target)
    loss_D = 0.5 * (F.mse_loss(pred_fake, torch.zeros_like(pred_fake)) + F.mse_loss(pred_real, torch.ones_like(pred_real)))
    loss_D.backward()
    optimizer_D.step()

    # generator step: all terms summed, one backward
    optimizer_G.zero_grad()
    feats_fake, feats_real = features(fake), features(target)
    style_loss = sum(F.mse_loss(gram(a), gram(b)) for a, b in zip(feats_fake, feats_real)) * lambda_style
    perceptual_loss = F.mse_loss(feats_fake[-1], feats_real[-1]) * lambda_perc
    pred = netD(fake)
    gan_G = F.mse_loss(pred, torch.ones_like(pred))
    loss_G = style_loss + perceptual_loss + gan_G
    loss_G.backward()
    optimizer_G.step()
    if it % 10 == 0:
        print(f"iter {it}: D {loss_D.item():.4f} style {style_loss.item():.4f} perc {perceptual_loss.item():.4f} gan {gan_G.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(netG, netD):.8f}")
