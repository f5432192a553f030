"""WGAN-GP on a mixture of Gaussians; the gradient penalty comes from the shared gan_losses helpers."""
import torch
import torch.nn as nn

from gan_losses import critic_grad_norm, gradient_penalty

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)

Z_DIM, BATCH, N_CRITIC, LAMBDA_GP = 4, 64, 3, 10.0

netG = nn.Sequential(nn.Linear(Z_DIM, 32), nn.ReLU(), nn.Linear(32, 2))
netD = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-3, betas=(0.5, 0.9))
optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-3, betas=(0.5, 0.9))

centers = torch.tensor([[2.0, 0.0], [-2.0, 0.0], [0.0, 2.0], [0.0, -2.0]])


def real_data():
    return centers[torch.randint(0, 4, (BATCH,))] + 0.1 * torch.randn(BATCH, 2)


for iteration in range(50):
    for p in netD.parameters():
        p.requires_grad_(True)
    for _ in range(N_CRITIC):
        real = real_data()
        with torch.no_grad():
            fake = netG(torch.randn(BATCH, Z_DIM))
        netD.zero_grad()
        D_real = netD(real).mean()
        D_fake = netD(fake).mean()
        GP = gradient_penalty(netD, real, fake, create_graph=True)
        D_cost = D_fake - D_real + LAMBDA_GP * GP
        D_cost.backward()
        Wasserstein_D = (D_real - D_fake).item()
        optimizerD.step()

    for p in netD.parameters():
        p.requires_grad_(False)
    netG.zero_grad()
    G_cost = -netD(netG(torch.randn(BATCH, Z_DIM))).mean()
    G_cost.backward()
    optimizerG.step()
    if iteration % 10 == 0:
        print(f"iter {iteration}: W {Wasserstein_D:.4f} GP {GP.item():.4f} |grad D| {critic_grad_norm(netD, real):.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(netG, netD):.8f}")
