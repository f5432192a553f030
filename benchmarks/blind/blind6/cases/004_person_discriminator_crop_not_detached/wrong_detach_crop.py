"""Pedestrian-synthesis pix2pix model: an image discriminator on (input, output) pairs plus a person
discriminator on the crop of the generated pedestrian box."""
import torch
import torch.nn as nn

torch.manual_seed(0)


class GANLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.BCEWithLogitsLoss()

    def __call__(self, prediction, target_is_real):
        target = torch.full_like(prediction, 1.0 if target_is_real else 0.0)
        return self.loss(prediction, target)


class PedestrianPix2Pix:
    def __init__(self, lambda_L1=10.0):
        self.netG = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                                  nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1), nn.Tanh())
        self.netD_image = nn.Sequential(nn.Conv2d(2, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                                        nn.Conv2d(8, 1, 4, stride=2, padding=1))
        self.netD_person = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
                                         nn.Flatten(), nn.Linear(8 * 4 * 4, 1))
        self.criterionGAN = GANLoss()
        self.criterionL1 = nn.L1Loss()
        self.lambda_L1 = lambda_L1
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
        self.optimizer_D_image = torch.optim.Adam(self.netD_image.parameters(), lr=2e-3, betas=(0.5, 0.999))
        self.optimizer_D_person = torch.optim.Adam(self.netD_person.parameters(), lr=2e-3, betas=(0.5, 0.999))

    def set_input(self, real_A, real_B, bbox):
        self.real_A, self.real_B, self.bbox = real_A, real_B, bbox

    def forward(self):
        self.fake_B = self.netG(self.real_A)
        y, x = self.bbox
        self.person_crop_real = self.real_B[:, :, y:y + 8, x:x + 8]
        self.person_crop_fake = self.fake_B[:, :, y:y + 8, x:x + 8].detach()

    def backward_D_image(self):
        pred_fake = self.netD_image(torch.cat((self.real_A, self.fake_B), 1).detach())
        pred_real = self.netD_image(torch.cat((self.real_A, self.real_B), 1))
        self.loss_D_image = 0.5 * (self.criterionGAN(pred_fake, False) + self.criterionGAN(pred_real, True))
        self.loss_D_image.backward()

    def backward_D_person(self):
        pred_fake = self.netD_person(self.person_crop_fake)
        pred_real = self.netD_person(self.person_crop_real)
        self.loss_D_person = 0.5 * (self.criterionGAN(pred_fake, False) + self.criterionGAN(pred_real, True))
        self.loss_D_person.backward()

    def backward_G(self):
        loss_G_image = self.criterionGAN(self.netD_image(torch.cat((self.real_A, self.fake_B), 1)), True)
        loss_G_person = self.criterionGAN(self.netD_person(self.person_crop_fake), True)
        loss_G_L1 = self.criterionL1(self.fake_B, self.real_B) * self.lambda_L1
        self.loss_G = loss_G_image + loss_G_person + loss_G_L1
        self.loss_G.backward()

    def optimize_parameters(self):
        self.forward()
        self.optimizer_D_image.zero_grad()
        self.backward_D_image()
        self.optimizer_D_image.step()
        self.optimizer_D_person.zero_grad()
        self.backward_D_person()
        self.optimizer_D_person.step()
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


def make_batches(n=10, bs=4):
    out = []
    for _ in range(n):
        y, x = [int(v) for v in torch.randint(0, 8, (2,))]
        layout = torch.zeros(bs, 1, 16, 16)
        layout[:, :, y:y + 8, x:x + 8] = 1.0
        photo = torch.tanh(layout * torch.linspace(-1, 2, 16) + 0.1 * torch.randn(bs, 1, 16, 16))
        out.append((layout * 2 - 1, photo, (y, x)))
    return out


model = PedestrianPix2Pix()
batches = make_batches()
for epoch in range(3):
    for a, b, bbox in batches:
        model.set_input(a, b, bbox)
        model.optimize_parameters()
    print(f"epoch {epoch}: G {model.loss_G.item():.4f} D_img {model.loss_D_image.item():.4f} D_person {model.loss_D_person.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model.netG, model.netD_image, model.netD_person):.8f}")
