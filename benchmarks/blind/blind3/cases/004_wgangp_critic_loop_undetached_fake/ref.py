"""DeblurGAN-style conditional GAN: residual generator, WGAN-GP critic trained for several critic
updates per generator update, content (L1) loss for the generator."""
import torch
import torch.nn as nn
from torch import autograd

torch.manual_seed(0)


class ResnetGenerator(nn.Module):
    def __init__(self, ch=12):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, ch, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(ch, ch, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(ch, 1, 3, padding=1))

    def forward(self, x):
        return torch.clamp(x + self.body(x), -1.0, 1.0)


class NLayerDiscriminator(nn.Module):
    def __init__(self, ch=12):
        super().__init__()
        self.model = nn.Sequential(nn.Conv2d(1, ch, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                                   nn.Conv2d(ch, ch, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                                   nn.Conv2d(ch, 1, 3, padding=1))

    def forward(self, x):
        return self.model(x)


class DiscLossWGANGP:
    def __init__(self, lambda_gp=10.0):
        self.LAMBDA = lambda_gp

    def get_g_loss(self, net, realA, fakeB):
        return -net(fakeB).mean()

    def calc_gradient_penalty(self, netD, real_data, fake_data):
        alpha = torch.rand(real_data.size(0), 1, 1, 1).expand_as(real_data)
        interpolates = alpha * real_data + (1 - alpha) * fake_data
        interpolates.requires_grad_(True)
        disc_interpolates = netD(interpolates)
        gradients = autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                                  grad_outputs=torch.ones_like(disc_interpolates),
                                  create_graph=True, retain_graph=True)[0]
        gradients = gradients.view(gradients.size(0), -1)
        return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * self.LAMBDA

    def get_loss(self, net, realA, fakeB, realB):
        fakeB = fakeB.detach()  # stop backprop to the generator
        self.D_fake = net(fakeB).mean()
        self.D_real = net(realB).mean()
        self.loss_D = self.D_fake - self.D_real
        return self.loss_D + self.calc_gradient_penalty(net, realB, fakeB)


class ConditionalGAN:
    def __init__(self, critic_updates=5, lambda_content=100.0):
        self.netG, self.netD = ResnetGenerator(), NLayerDiscriminator()
        self.discLoss = DiscLossWGANGP()
        self.contentLoss = nn.L1Loss()
        self.critic_updates = critic_updates
        self.lambda_content = lambda_content
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=1e-4, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=1e-4, betas=(0.5, 0.999))

    def set_input(self, blurred, sharp):
        self.real_A, self.real_B = blurred, sharp

    def forward(self):
        self.fake_B = self.netG(self.real_A)

    def backward_D(self):
        self.loss_D = self.discLoss.get_loss(self.netD, self.real_A, self.fake_B, self.real_B)
        self.loss_D.backward()

    def backward_G(self):
        self.loss_G_GAN = self.discLoss.get_g_loss(self.netD, self.real_A, self.fake_B)
        self.loss_G_Content = self.contentLoss(self.fake_B, self.real_B) * self.lambda_content
        self.loss_G = self.loss_G_GAN + self.loss_G_Content
        self.loss_G.backward()

    def optimize_parameters(self):
        self.forward()
        for iter_d in range(self.critic_updates):
            self.optimizer_D.zero_grad()
            self.backward_D()
            self.optimizer_D.step()
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


def blur(x):
    k = torch.tensor([1.0, 2.0, 1.0])
    k = (k[:, None] * k[None, :]) / 16.0
    return nn.functional.conv2d(x, k.view(1, 1, 3, 3), padding=1)


def make_batches(n=12, bs=8):
    out = []
    for _ in range(n):
        sharp = (torch.rand(bs, 1, 12, 12) > 0.7).float() * 2 - 1
        out.append((blur(sharp), sharp))
    return out


model = ConditionalGAN()
for epoch in range(2):
    for blurred, sharp in make_batches():
        model.set_input(blurred, sharp)
        model.optimize_parameters()
    print(f"epoch {epoch}: G_GAN {model.loss_G_GAN.item():.4f} G_L1 {model.loss_G_Content.item():.4f} "
          f"D {model.loss_D.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model.netG, model.netD):.8f}")
