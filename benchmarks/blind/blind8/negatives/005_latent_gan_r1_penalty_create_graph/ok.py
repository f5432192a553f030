"""Adversarial latent autoencoder-style GAN on 2-D data: mapping F, generator G, encoder E
and latent discriminator D; the discriminator loss carries an R1 penalty on the reals."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)

Z, W = 4, 8


def mlp(i, o, h=32):
    return nn.Sequential(nn.Linear(i, h), nn.LeakyReLU(0.2), nn.Linear(h, o))


def discriminator_logistic_simple_gp(d_result_fake, d_result_real, reals, r1_gamma=10.0):
    loss = F.softplus(d_result_fake) + F.softplus(-d_result_real)
    if r1_gamma != 0.0:
        real_loss = d_result_real.sum()
        real_grads = torch.autograd.grad(real_loss, reals, create_graph=True, retain_graph=True)[0]
        r1_penalty = torch.sum(real_grads.pow(2.0), dim=1)
        loss = loss + r1_penalty * (r1_gamma * 0.5)
    return loss.mean()


def generator_logistic_non_saturating(d_result_fake):
    return F.softplus(-d_result_fake).mean()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mapping_fl = mlp(Z, W)
        self.decoder = mlp(W, 2)
        self.encoder = mlp(2, W)
        self.mapping_fd = mlp(W, 1)

    def generate(self, count):
        return self.decoder(self.mapping_fl(torch.randn(count, Z)))

    def forward(self, x, d_train):
        if d_train:
            with torch.no_grad():
                Xp = self.generate(x.size(0))
            x.requires_grad = True
            d_result_real = self.mapping_fd(self.encoder(x))
            d_result_fake = self.mapping_fd(self.encoder(Xp.detach()))
            return discriminator_logistic_simple_gp(d_result_fake, d_result_real, x)
        Xp = self.generate(x.size(0))
        return generator_logistic_non_saturating(self.mapping_fd(self.encoder(Xp)))


def sample_reals(n=64):
    k = torch.randint(0, 4, (n,)).double() * (torch.pi / 2)
    return torch.stack([k.cos(), k.sin()], 1) * 1.5 + 0.1 * torch.randn(n, 2)


model = Model()
encoder_optimizer = torch.optim.Adam(list(model.encoder.parameters()) + list(model.mapping_fd.parameters()),
                                     lr=2e-3, betas=(0.0, 0.99))
decoder_optimizer = torch.optim.Adam(list(model.decoder.parameters()) + list(model.mapping_fl.parameters()),
                                     lr=2e-3, betas=(0.0, 0.99))
for it in range(120):
    x = sample_reals()
    encoder_optimizer.zero_grad()
    loss_d = model(x, d_train=True)
    loss_d.backward()
    encoder_optimizer.step()

    decoder_optimizer.zero_grad()
    loss_g = model(x, d_train=False)
    loss_g.backward()
    decoder_optimizer.step()
    if it % 40 == 0:
        print(f"iter {it}: loss_d {loss_d.item():.4f} loss_g {loss_g.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
