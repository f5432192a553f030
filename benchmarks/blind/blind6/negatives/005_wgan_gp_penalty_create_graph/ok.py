"""WGAN-GP on a mixture of 2-D Gaussians: several critic iterations per generator iteration, with the
gradient penalty on random interpolates between real and generated samples."""
import torch
import torch.nn as nn

torch.manual_seed(0)

DIM, LAMBDA, CRITIC_ITERS, BATCH = 32, 0.1, 3, 64

netG = nn.Sequential(nn.Linear(2, DIM), nn.ReLU(), nn.Linear(DIM, DIM), nn.ReLU(), nn.Linear(DIM, 2))
netD = nn.Sequential(nn.Linear(2, DIM), nn.ReLU(), nn.Linear(DIM, DIM), nn.ReLU(), nn.Linear(DIM, 1))
optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-3, betas=(0.5, 0.9))
optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-3, betas=(0.5, 0.9))
centers = torch.tensor([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]]) * 1.5


def sample_real(n=BATCH):
    return centers[torch.randint(0, 4, (n,))] + 0.05 * torch.randn(n, 2)


def calc_gradient_penalty(netD, real_data, fake_data):
    alpha = torch.rand(real_data.size(0), 1).expand(real_data.size())
    interpolates = (alpha * real_data + (1 - alpha) * fake_data).requires_grad_(True)
    disc_interpolates = netD(interpolates)
    gradients = torch.autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                                    grad_outputs=torch.ones(disc_interpolates.size()),
                                    create_graph=True, retain_graph=True, only_inputs=True)[0]
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * LAMBDA


for iteration in range(60):
    for p in netD.parameters():
        p.requires_grad_(True)
    for _ in range(CRITIC_ITERS):
        real = sample_real()
        netD.zero_grad()
        D_real = netD(real).mean()
        noise = torch.randn(BATCH, 2)
        fake = netG(noise).detach()
        D_fake = netD(fake).mean()
        gradient_penalty = calc_gradient_penalty(netD, real, fake)
        D_cost = D_fake - D_real + gradient_penalty
        D_cost.backward()
        optimizerD.step()

    for p in netD.parameters():
        p.requires_grad_(False)
    netG.zero_grad()
    G_cost = -netD(netG(torch.randn(BATCH, 2))).mean()
    G_cost.backward()
    optimizerG.step()
    if iteration % 20 == 0:
        print(f"iter {iteration}: D_cost {D_cost.item():.4f} W {(D_real - D_fake).item():.4f} G_cost {G_cost.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(netG, netD):.8f}")
