"""Motion retargeting GAN (skeleton A -> skeleton B) with a temporal-conv generator and
discriminator: generator step first, then the discriminator step on the same fake motion."""
import torch
import torch.nn as nn

torch.manual_seed(0)

J_A, J_B, T = 6, 5, 16


class MotionGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(J_A, 24, 3, padding=1), nn.LeakyReLU(0.2),
                                 nn.Conv1d(24, 24, 3, padding=1), nn.LeakyReLU(0.2),
                                 nn.Conv1d(24, J_B, 3, padding=1))

    def forward(self, x):
        return self.net(x)


class MotionDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(J_B, 16, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                                 nn.Conv1d(16, 1, 3, padding=1))

    def forward(self, x):
        return self.net(x)


class GAN_model:
    def __init__(self, lambda_rec=5.0):
        self.netG, self.netD = MotionGenerator(), MotionDiscriminator()
        self.criterion_gan = nn.MSELoss()
        self.criterion_rec = nn.L1Loss()
        self.lambda_rec = lambda_rec
        self.optimizerG = torch.optim.Adam(self.netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
        self.optimizerD = torch.optim.Adam(self.netD.parameters(), lr=2e-3, betas=(0.5, 0.999))

    def set_requires_grad(self, net, flag):
        for p in net.parameters():
            p.requires_grad = flag

    def gan_loss(self, pred, is_real):
        return self.criterion_gan(pred, torch.full_like(pred, 1.0 if is_real else 0.0))

    def forward(self, motion_a, motion_b):
        self.motion_a, self.motion_b = motion_a, motion_b
        self.fake_b = self.netG(motion_a)

    def backward_G(self):
        self.loss_G_gan = self.gan_loss(self.netD(self.fake_b), True)
        self.loss_rec = self.criterion_rec(self.fake_b, self.motion_b)
        self.loss_G = self.loss_G_gan + self.lambda_rec * self.loss_rec
        self.loss_G.backward()

    def backward_D_basic(self, netD, real, fake):
        loss_D_real = self.gan_loss(netD(real), True)
        loss_D_fake = self.gan_loss(netD(fake.detach()), False)
        loss_D = (loss_D_real + loss_D_fake) * 0.5
        loss_D.backward()
        return loss_D

    def optimize_parameters(self, motion_a, motion_b):
        self.forward(motion_a, motion_b)
        self.set_requires_grad(self.netD, False)
        self.optimizerG.zero_grad()
        self.backward_G()
        self.optimizerG.step()
        self.set_requires_grad(self.netD, True)
        self.optimizerD.zero_grad()
        self.loss_D = self.backward_D_basic(self.netD, self.motion_b, self.fake_b)
        self.optimizerD.step()


def make_batches(n=20, bs=8):
    t = torch.linspace(0, 6.28, T)
    mix = torch.randn(J_A, J_B) * 0.5
    out = []
    for _ in range(n):
        phase = torch.rand(bs, J_A, 1) * 6.28
        a = torch.sin(t[None, None, :] + phase)
        b = torch.einsum("bjt,jk->bkt", a, mix)
        out.append((a, b))
    return out


model = GAN_model()
for epoch in range(3):
    for a, b in make_batches():
        model.optimize_parameters(a, b)
    print(f"epoch {epoch}: G {model.loss_G.item():.4f} rec {model.loss_rec.item():.4f} D {model.loss_D.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model.netG, model.netD):.8f}")
