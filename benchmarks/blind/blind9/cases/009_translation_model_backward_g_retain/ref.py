"""Unpaired domain-translation GAN with an identity loss; the model class follows the
set_input / forward / backward_D / backward_G / optimize_parameters layout."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

DIM = 8


def mlp(i, o, h=40):
    return nn.Sequential(nn.Linear(i, h), nn.LeakyReLU(0.2), nn.Linear(h, o))


class TranslationModel:
    def __init__(self, lambda_idt=0.5, lambda_nce=1.0):
        self.netG = mlp(DIM, DIM)
        self.netD = mlp(DIM, 1)
        self.netF = mlp(DIM, 16)
        self.lambda_idt, self.lambda_nce = lambda_idt, lambda_nce
        self.optimizer_G = torch.optim.Adam(list(self.netG.parameters()) + list(self.netF.parameters()), lr=1e-3, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=1e-3, betas=(0.5, 0.999))

    def set_input(self, real_A, real_B):
        self.real_A, self.real_B = real_A, real_B

    def forward(self):
        self.fake_B = self.netG(self.real_A)
        self.idt_B = self.netG(self.real_B)

    def compute_D_loss(self):
        pred_fake = self.netD(self.fake_B.detach())
        pred_real = self.netD(self.real_B)
        self.loss_D_fake = F.mse_loss(pred_fake, torch.zeros_like(pred_fake))
        self.loss_D_real = F.mse_loss(pred_real, torch.ones_like(pred_real))
        return (self.loss_D_fake + self.loss_D_real) * 0.5

    def patch_nce(self, src, tgt):
        f_q = F.normalize(self.netF(tgt), dim=1)
        f_k = F.normalize(self.netF(src), dim=1).detach()
        logits = f_q @ f_k.t() / 0.07
        return F.cross_entropy(logits, torch.arange(src.size(0)))

    def compute_G_loss(self):
        pred_fake = self.netD(self.fake_B)
        self.loss_G_GAN = F.mse_loss(pred_fake, torch.ones_like(pred_fake))
        self.loss_NCE = self.patch_nce(self.real_A, self.fake_B) * self.lambda_nce
        self.loss_idt = F.l1_loss(self.idt_B, self.real_B) * self.lambda_idt
        return self.loss_G_GAN + self.loss_NCE + self.loss_idt

    def set_requires_grad(self, net, flag):
        for p in net.parameters():
            p.requires_grad = flag

    def optimize_parameters(self):
        self.forward()
        # update D
        self.set_requires_grad(self.netD, True)
        self.optimizer_D.zero_grad()
        self.loss_D = self.compute_D_loss()
        self.loss_D.backward()
        self.optimizer_D.step()
        # update G
        self.set_requires_grad(self.netD, False)
        self.optimizer_G.zero_grad()
        self.loss_G = self.compute_G_loss()
        self.loss_G.backward()
        self.optimizer_G.step()


def sample_domains(n=32):
    a = torch.randn(n, DIM)
    rot = torch.linalg.qr(torch.randn(DIM, DIM, generator=torch.Generator().manual_seed(5)))[0]
    return a, torch.tanh(torch.randn(n, DIM) @ rot) + 0.5


model = TranslationModel()
for it in range(100):
    model.set_input(*sample_domains())
    model.optimize_parameters()
    if it % 25 == 0:
        print(f"it {it}: D {model.loss_D.item():.4f} G_GAN {model.loss_G_GAN.item():.4f} NCE {model.loss_NCE.item():.4f} idt {model.loss_idt.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model.netG, model.netD, model.netF):.8f}")
