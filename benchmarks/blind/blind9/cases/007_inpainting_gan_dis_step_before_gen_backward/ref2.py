"""Edge-guided inpainting model (toy 1-D signals): generator + discriminator wrapped in one
module with process() / backward() methods, as in many GAN code bases."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

L = 16


class AdversarialLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.criterion = nn.BCEWithLogitsLoss()

    def forward(self, outputs, is_real):
        labels = torch.ones_like(outputs) if is_real else torch.zeros_like(outputs)
        return self.criterion(outputs, labels)


class InpaintGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 * L, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, L))

    def forward(self, images_masked, masks):
        return torch.tanh(self.net(torch.cat([images_masked, masks], 1)))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(L, 64), nn.LeakyReLU(0.2), nn.Linear(64, 1))

    def forward(self, x):
        return self.net(x)


class InpaintingModel(nn.Module):
    def __init__(self, adv_weight=0.1, l1_weight=1.0):
        super().__init__()
        self.generator = InpaintGenerator()
        self.discriminator = Discriminator()
        self.adversarial_loss = AdversarialLoss()
        self.adv_weight, self.l1_weight = adv_weight, l1_weight
        self.gen_optimizer = torch.optim.Adam(self.generator.parameters(), lr=1e-3, betas=(0.0, 0.9))
        self.dis_optimizer = torch.optim.Adam(self.discriminator.parameters(), lr=4e-4, betas=(0.0, 0.9))

    def forward(self, images, masks):
        images_masked = images * (1 - masks)
        return self.generator(images_masked, masks)

    def process(self, images, masks):
        self.gen_optimizer.zero_grad()
        self.dis_optimizer.zero_grad()
        outputs = self(images, masks)

        # discriminator loss
        dis_real = self.discriminator(images)
        dis_fake = self.discriminator(outputs.detach())
        dis_loss = (self.adversarial_loss(dis_real, True) + self.adversarial_loss(dis_fake, False)) / 2

        # generator adversarial + reconstruction loss
        self.discriminator.requires_grad_(False)
        gen_fake = self.discriminator(outputs)
        self.discriminator.requires_grad_(True)
        gen_gan_loss = self.adversarial_loss(gen_fake, True) * self.adv_weight
        gen_l1_loss = F.l1_loss(outputs, images) * self.l1_weight / torch.mean(masks)
        gen_loss = gen_gan_loss + gen_l1_loss
        return outputs, gen_loss, dis_loss

    def backward(self, gen_loss=None, dis_loss=None):
        if dis_loss is not None:
            dis_loss.backward()
        if gen_loss is not None:
            gen_loss.backward()
        self.dis_optimizer.step()
        self.gen_optimizer.step()


def make_batch(bs=32):
    t = torch.linspace(0, 1, L)[None, :]
    freq = torch.rand(bs, 1) * 3 + 1
    images = 0.7 * torch.sin(6.28 * freq * t + torch.rand(bs, 1) * 6.28)
    start = torch.randint(0, L - 5, (bs, 1))
    idx = torch.arange(L)[None, :]
    masks = ((idx >= start) & (idx < start + 5)).float()
    return images, masks


model = InpaintingModel()
for iteration in range(120):
    images, masks = make_batch()
    outputs, gen_loss, dis_loss = model.process(images, masks)
    model.backward(gen_loss, dis_loss)
    if iteration % 40 == 0:
        print(f"iter {iteration}: gen {gen_loss.item():.4f} dis {dis_loss.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model.generator, model.discriminator):.8f}")
