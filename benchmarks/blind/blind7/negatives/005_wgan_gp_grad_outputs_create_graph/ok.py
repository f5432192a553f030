"""WGAN-GP critic/generator trainer (class based); the gradient penalty uses autograd.grad with
grad_outputs=ones, create_graph=True and retain_graph=True."""
import torch
import torch.nn as nn

torch.manual_seed(0)

Z, BATCH = 4, 32


class WGANGP(nn.Module):
    def __init__(self, lamda=10.0):
        super().__init__()
        self.generator = nn.Sequential(nn.Linear(Z, 32), nn.ReLU(), nn.Linear(32, 2))
        self.critic = nn.Sequential(nn.Linear(2, 32), nn.Softplus(), nn.Linear(32, 1))
        self.lamda = lamda

    def c_loss(self, x, z, return_g=False):
        g = self.generator(z)
        c_x = self.critic(x).mean()
        c_g = self.critic(g).mean()
        loss = -(c_x - c_g)
        return (loss, g) if return_g else loss

    def g_loss(self, z, return_g=False):
        g = self.generator(z)
        loss = -self.critic(g).mean()
        return (loss, g) if return_g else loss

    def gradient_penalty(self, x, g):
        assert x.size() == g.size()
        a = torch.rand(x.size(0), 1)
        interpolated = (a * x.detach() + (1 - a) * g.detach()).requires_grad_(True)
        c = self.critic(interpolated)
        gradients = torch.autograd.grad(c, interpolated, grad_outputs=torch.ones_like(c),
                                        create_graph=True, retain_graph=True)[0]
        return self.lamda * ((gradients.norm(2, dim=1) - 1) ** 2).mean()


def sample_x():
    t = torch.rand(BATCH, 1) * 6.28
    return torch.cat([t.cos(), t.sin()], 1) * 1.5


wgan = WGANGP()
c_opt = torch.optim.Adam(wgan.critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
g_opt = torch.optim.Adam(wgan.generator.parameters(), lr=1e-3, betas=(0.5, 0.9))

for it in range(60):
    for _ in range(3):
        x, z = sample_x(), torch.randn(BATCH, Z)
        c_opt.zero_grad()
        c_loss, g = wgan.c_loss(x, z, return_g=True)
        c_loss_gp = c_loss + wgan.gradient_penalty(x, g)
        c_loss_gp.backward()
        c_opt.step()
    z = torch.randn(BATCH, Z)
    g_opt.zero_grad()
    g_loss = wgan.g_loss(z)
    g_loss.backward()
    g_opt.step()
    if it % 20 == 0:
        print(f"iter {it}: critic {c_loss.item():.4f} gen {g_loss.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(wgan):.8f}")
