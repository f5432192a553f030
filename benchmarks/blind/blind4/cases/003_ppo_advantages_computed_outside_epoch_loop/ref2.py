"""PPO learner for a cooperative team task: several optimisation epochs over one collected batch."""
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

OBS_DIM, N_ACTIONS = 10, 5


@dataclass
class EpisodeBatch:
    obs: torch.Tensor
    actions: torch.Tensor
    old_log_probs: torch.Tensor
    returns: torch.Tensor
    advantages: Optional[torch.Tensor] = None


class PPOLearner:
    def __init__(self, ppo_epochs=4, clip=0.2):
        self.actor = nn.Sequential(nn.Linear(OBS_DIM, 64), nn.ReLU(), nn.Linear(64, N_ACTIONS))
        self.critic = nn.Sequential(nn.Linear(OBS_DIM, 64), nn.ReLU(), nn.Linear(64, 1))
        self.optimizer = torch.optim.Adam(list(self.actor.parameters()) + list(self.critic.parameters()), lr=2e-3)
        self.ppo_epochs, self.clip = ppo_epochs, clip

    @torch.no_grad()
    def collect(self, env_gen, team_size=64):
        obs = torch.randn(team_size, OBS_DIM, generator=env_gen)
        dist = torch.distributions.Categorical(logits=self.actor(obs))
        actions = dist.sample()
        target = (obs[:, :N_ACTIONS] * torch.arange(1.0, N_ACTIONS + 1)).argmax(-1)
        rewards = (actions == target).float() + 0.1 * obs[:, -1]
        return EpisodeBatch(obs, actions, dist.log_prob(actions), rewards)

    def compute_advantages(self, batch):
        values = self.critic(batch.obs).squeeze(-1).detach()
        adv = batch.returns - values
        batch.advantages = (adv - adv.mean()) / (adv.std() + 1e-8)

    def train(self, batch):
        self.compute_advantages(batch)
        stats = []
        for _ in range(self.ppo_epochs):
            dist = torch.distributions.Categorical(logits=self.actor(batch.obs))
            ratio = torch.exp(dist.log_prob(batch.actions) - batch.old_log_probs)
            surr1 = ratio * batch.advantages
            surr2 = torch.clamp(ratio, 1 - self.clip, 1 + self.clip) * batch.advantages
            actor_loss = -torch.min(surr1, surr2).mean() - 0.01 * dist.entropy().mean()
            critic_loss = F.mse_loss(self.critic(batch.obs).squeeze(-1), batch.returns)
            loss = actor_loss + 0.5 * critic_loss
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            stats.append(loss.item())
        return sum(stats) / len(stats)


learner = PPOLearner()
env_gen = torch.Generator().manual_seed(3)
for it in range(40):
    batch = learner.collect(env_gen)
    mean_loss = learner.train(batch)
    if it % 10 == 0:
        print(f"iter {it}: loss {mean_loss:.4f} reward {batch.returns.mean():.3f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(learner.actor, learner.critic):.8f}")
