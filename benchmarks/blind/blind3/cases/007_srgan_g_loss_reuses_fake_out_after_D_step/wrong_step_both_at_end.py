"""SRGAN-style super-resolution GAN: pixel + adversarial + total-variation generator loss,
discriminator on high-resolution patches."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

UPSCALE = 2


class Generator(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.head = nn.Sequential(nn.Conv2d(1, ch, 3, padding=1), nn.PReLU())
        self.res = nn.Sequential(nn.Conv2d(ch, ch, 3, padding=1), nn.PReLU(), nn.Conv2d(ch, ch, 3, padding=1))
        self.up = nn.Sequential(nn.Conv2d(ch, UPSCALE ** 2, 3, padding=1), nn.PixelShuffle(UPSCALE))

    def forward(self, x):
        h = self.head(x)
        return (torch.tanh(self.up(h + self.res(h))) + 1) / 2


class Discriminator(nn.Module):
    def __init__(self, ch=16):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, ch, 3, padding=1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(ch, ch, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(ch, 1))

    def forward(self, x):
        return torch.sigmoid(self.net(x))


class TVLoss(nn.Module):
    def forward(self, x):
        h_tv = (x[:, :, 1:, :] - x[:, :, :-1, :]).pow(2).mean()
        w_tv = (x[:, :, :, 1:] - x[:, :, :, :-1]).pow(2).mean()
        return h_tv + w_tv


class GeneratorLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.mse_loss = nn.MSELoss()
        self.tv_loss = TVLoss()

    def forward(self, out_labels, out_images, target_images):
        adversarial_loss = torch.mean(1 - out_labels)
        image_loss = self.mse_loss(out_images, target_images)
        return image_loss + 0.005 * adversarial_loss + 2e-4 * self.tv_loss(out_images)


def make_pairs(n=16, bs=8, size=16):
    out = []
    for _ in range(n):
        f = torch.rand(bs, 1, 1, 1) * 2 + 0.5
        g = torch.linspace(0, 3.14, size)
        hr = (torch.sin(f * g[None, None, :, None]) * torch.cos(f * g[None, None, None, :]) + 1) / 2
        lr = F.avg_pool2d(hr, UPSCALE)
        out.append((lr, hr))
    return out


netG, netD = Generator(), Discriminator()
generator_criterion = GeneratorLoss()
optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-3)
optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-3)

for epoch in range(1, 4):
    netG.train()
    netD.train()
    running = {"d_loss": 0.0, "g_loss": 0.0}
    train_set = make_pairs()
    for data, target in train_set:
        real_img = target
        z = data
        fake_img = netG(z)

        # (1) Update D network: maximize D(x) - D(G(z))
        netD.zero_grad()
        real_out = netD(real_img).mean()
        fake_out = netD(fake_img).mean()
        d_loss = 1 - real_out + fake_out
        d_loss.backward(retain_graph=True)

        # (2) Update G network: minimize 1 - D(G(z)) + pixel loss + TV loss
        netG.zero_grad()
        g_loss = generator_criterion(fake_out, fake_img, real_img)
        g_loss.backward()
        optimizerD.step()
        optimizerG.step()

        running["d_loss"] += d_loss.item()
        running["g_loss"] += g_loss.item()
    print(f"[{epoch}/3] Loss_D: {running['d_loss'] / len(train_set):.4f} Loss_G: {running['g_loss'] / len(train_set):.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(netG, netD):.8f}")
