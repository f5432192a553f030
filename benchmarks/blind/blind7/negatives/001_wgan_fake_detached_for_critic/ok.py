"""WGAN (weight clipping) in the style of the PyTorch-GAN collection: the generated batch is detached
for the critic update and scored again, undetached, for the generator update every n_critic steps."""
import torch
import torch.nn as nn

torch.manual_seed(0)

LATENT, BATCH, N_CRITIC, CLIP = 6, 48, 4, 0.05

generator = nn.Sequential(nn.Linear(LATENT, 32), nn.ReLU(), nn.Linear(32, 3))
discriminator = nn.Sequential(nn.Linear(3, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
optimizer_G = torch.optim.RMSprop(generator.parameters(), lr=5e-4)
optimizer_D = torch.optim.RMSprop(discriminator.parameters(), lr=5e-4)

mix = torch.randn(3, 3)

batches_done = 0
for i in range(120):
    real_imgs = torch.tanh(torch.randn(BATCH, 3) @ mix)

    # ---------------------
    #  Train Discriminator
    # ---------------------
    optimizer_D.zero_grad()
    z = torch.randn(BATCH, LATENT)
    gen_imgs = generator(z)
    fake_imgs = gen_imgs.detach()
    loss_D = -torch.mean(discriminator(real_imgs)) + torch.mean(discriminator(fake_imgs))
    loss_D.backward()
    optimizer_D.step()
    for p in discriminator.parameters():
        p.data.clamp_(-CLIP, CLIP)

    # -----------------
    #  Train Generator
    # -----------------
    if i % N_CRITIC == 0:
        optimizer_G.zero_grad()
        loss_G = -torch.mean(discriminator(gen_imgs))
        loss_G.backward()
        optimizer_G.step()
        batches_done += 1
        if batches_done % 10 == 1:
            print(f"[{i}] D loss {loss_D.item():.4f} G loss {loss_G.item():.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(generator, discriminator):.8f}")
