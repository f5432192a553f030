"""Relativistic-average GAN step of an ESRGAN-like super-resolution model (1-D signals):
G update (pixel + relativistic adversarial loss), then D update with the real and fake
halves backpropagated separately."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)

LR_LEN, HR_LEN = 16, 32


class SRNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv1d(1, 16, 3, padding=1), nn.LeakyReLU(0.2), nn.Conv1d(16, 2, 3, padding=1))

    def forward(self, x):
        up = F.interpolate(x, scale_factor=2, mode="linear", align_corners=False)
        return up + self.body(x).transpose(1, 2).reshape(x.size(0), 1, -1)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(1, 16, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                                 nn.Flatten(), nn.Linear(16 * HR_LEN // 2, 1))

    def forward(self, x):
        return self.net(x)


class SRGANModel:
    def __init__(self):
        self.netG, self.netD = SRNet(), Critic()
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=1e-3, betas=(0.9, 0.99))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=1e-3, betas=(0.9, 0.99))
        self.cri_gan = nn.BCEWithLogitsLoss()
        self.l_gan_w = 0.05

    def optimize_parameters(self, var_L, var_ref):
        # G
        for p in self.netD.parameters():
            p.requires_grad = False
        self.optimizer_G.zero_grad()
        self.fake_H = self.netG(var_L)
        l_g_pix = F.l1_loss(self.fake_H, var_ref)
        pred_g_fake = self.netD(self.fake_H)
        pred_d_real = self.netD(var_ref).detach()
        l_g_gan = self.l_gan_w * (
            self.cri_gan(pred_d_real - torch.mean(pred_g_fake), torch.zeros_like(pred_d_real)) +
            self.cri_gan(pred_g_fake - torch.mean(pred_d_real), torch.ones_like(pred_g_fake))) / 2
        l_g_total = l_g_pix + l_g_gan
        l_g_total.backward()
        self.optimizer_G.step()

        # D
        for p in self.netD.parameters():
            p.requires_grad = True
        self.optimizer_D.zero_grad()
        # real
        pred_d_fake = self.netD(self.fake_H.detach()).detach()
        pred_d_real = self.netD(var_ref)
        l_d_real = self.cri_gan(pred_d_real - torch.mean(pred_d_fake), torch.ones_like(pred_d_real)) * 0.5
        l_d_real.backward()
        # fake
        pred_d_fake = self.netD(self.fake_H.detach())
        l_d_fake = self.cri_gan(pred_d_fake - torch.mean(pred_d_real.detach()), torch.zeros_like(pred_d_fake)) * 0.5
        l_d_fake.backward()
        self.optimizer_D.step()
        return l_g_pix.item(), l_g_gan.item(), (l_d_real + l_d_fake).item()


def make_pairs(n=20, bs=16):
    t = torch.linspace(0, 1, HR_LEN)
    out = []
    for _ in range(n):
        f = torch.rand(bs, 1) * 4 + 1
        hr = (torch.sin(2 * torch.pi * f * t) + 0.3 * torch.sin(6 * torch.pi * f * t)).unsqueeze(1)
        out.append((hr[:, :, ::2].contiguous(), hr))
    return out


model = SRGANModel()
pairs = make_pairs()
for epoch in range(4):
    for var_L, var_ref in pairs:
        pix, gan, d = model.optimize_parameters(var_L, var_ref)
    print(f"epoch {epoch}: pix {pix:.4f} g_gan {gan:.4f} d {d:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model.netG, model.netD):.8f}")
