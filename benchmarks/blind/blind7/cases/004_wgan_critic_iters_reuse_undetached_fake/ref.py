"""WGAN (weight clipping) on a 2-D toy distribution: several critic iterations per generator step."""
import torch
import torch.nn as nn

torch.manual_seed(0)

Z_DIM, BATCH = 8, 64
CRITIC_ITERATIONS, WEIGHT_CLIP = 3, 0.05


class WGANTrainer:
    def __init__(self):
        self.gen = nn.Sequential(nn.Linear(Z_DIM, 32), nn.ReLU(), nn.Linear(32, 2))
        self.critic = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
        self.opt_gen = torch.optim.RMSprop(self.gen.parameters(), lr=5e-4)
        self.opt_critic = torch.optim.RMSprop(self.critic.parameters(), lr=5e-4)

    def critic_step(self, real, fake):
        D_real = self.critic(real).reshape(-1)
        D_fake = self.critic(fake).reshape(-1)
        loss_critic = -(torch.mean(D_real) - torch.mean(D_fake))
        self.critic.zero_grad()
        loss_critic.backward()
        self.opt_critic.step()
        for p in self.critic.parameters():
            p.data.clamp_(-WEIGHT_CLIP, WEIGHT_CLIP)
        return loss_critic

    def generator_step(self, fake):
        G_loss = -torch.mean(self.critic(fake).reshape(-1))
        self.gen.zero_grad()
        G_loss.backward()
        self.opt_gen.step()
        return G_loss

    def train_step(self, real):
        noise = torch.randn(real.size(0), Z_DIM)
        fake = self.gen(noise)
        for _ in range(CRITIC_ITERATIONS):
            loss_critic = self.critic_step(real, fake.detach())
        G_loss = self.generator_step(fake)
        return loss_critic.item(), G_loss.item()


def real_batch():
    theta = torch.rand(BATCH) * 6.2831853
    r = 2.0 + 0.1 * torch.randn(BATCH)
    return torch.stack([r * theta.cos(), r * theta.sin()], 1)


trainer = WGANTrainer()
for it in range(80):
    d, g = trainer.train_step(real_batch())
    if it % 20 == 0:
        print(f"iter {it}: loss D {d:.4f} loss G {g:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(trainer.gen, trainer.critic):.8f}")
