"""DDPG on a 1-D point-mass task: critic update, then an actor update whose loss goes through the critic."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

S_DIM, A_DIM = 3, 1


class Actor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(S_DIM, 64), nn.ReLU(), nn.Linear(64, A_DIM), nn.Tanh())

    def forward(self, s):
        return self.net(s)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(S_DIM + A_DIM, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, xs):
        s, a = xs
        return self.net(torch.cat([s, a], -1))


class DDPG:
    def __init__(self, gamma=0.95, tau=0.05):
        self.actor, self.critic = Actor(), Critic()
        self.actor_target, self.critic_target = copy.deepcopy(self.actor), copy.deepcopy(self.critic)
        self.actor_optim = torch.optim.Adam(self.actor.parameters(), lr=1e-3)
        self.critic_optim = torch.optim.Adam(self.critic.parameters(), lr=2e-3)
        self.gamma, self.tau = gamma, tau

    def update_policy(self, s, a, r, s2):
        with torch.no_grad():
            target_q = r + self.gamma * self.critic_target([s2, self.actor_target(s2)])
        self.critic.zero_grad()
        q_batch = self.critic([s, a])
        value_loss = F.mse_loss(q_batch, target_q)
        value_loss.backward()
        self.critic_optim.step()

        self.actor.zero_grad()
        policy_loss = -self.critic([s, self.actor(s)])
        policy_loss = policy_loss.mean()
        policy_loss.backward()
        self.actor_optim.step()

        self.soft_update(self.actor_target, self.actor)
        self.soft_update(self.critic_target, self.critic)
        return value_loss.item(), policy_loss.item()

    @torch.no_grad()
    def soft_update(self, target, source):
        for t, s in zip(target.parameters(), source.parameters()):
            t.mul_(1 - self.tau).add_(self.tau * s)


def env_step(s, a):
    pos, vel, goal = s[:, 0:1], s[:, 1:2], s[:, 2:3]
    vel = 0.9 * vel + 0.2 * a
    pos = pos + 0.1 * vel
    return torch.cat([pos, vel, goal], 1), -(pos - goal).abs()


agent = DDPG()
gen = torch.Generator().manual_seed(6)
for it in range(150):
    s = torch.randn(64, S_DIM, generator=gen)
    with torch.no_grad():
        a = (agent.actor(s) + 0.2 * torch.randn(64, A_DIM, generator=gen)).clamp(-1, 1)
    s2, r = env_step(s, a)
    v_loss, p_loss = agent.update_policy(s, a, r, s2)
    if it % 50 == 0:
        print(f"iter {it}: value {v_loss:.4f} policy {p_loss:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(agent.actor, agent.critic, agent.actor_target, agent.critic_target):.8f}")
