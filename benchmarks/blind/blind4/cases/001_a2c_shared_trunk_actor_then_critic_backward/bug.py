"""Advantage actor-critic on a small contextual task; the actor and the critic share a feature trunk."""
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

OBS_DIM, N_ACTIONS, HORIZON = 8, 4, 16


class ActorCritic(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(OBS_DIM, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.policy_head = nn.Linear(hidden, N_ACTIONS)
        self.value_head = nn.Linear(hidden, 1)

    def forward(self, obs):
        features = self.trunk(obs)
        return self.policy_head(features), self.value_head(features).squeeze(-1)


class ToyEnv:
    """The rewarded action is the arg-max of a fixed projection of the observation."""

    def __init__(self, seed=1):
        self.gen = torch.Generator().manual_seed(seed)
        self.proj = torch.randn(OBS_DIM, N_ACTIONS, generator=self.gen)
        self.obs = self._draw()

    def _draw(self):
        return torch.randn(OBS_DIM, generator=self.gen)

    def step(self, action):
        best = int((self.obs @ self.proj).argmax())
        reward = 1.0 if action == best else -0.1
        self.obs = self._draw()
        return self.obs, reward


@dataclass
class Rollout:
    log_probs: list = field(default_factory=list)
    values: list = field(default_factory=list)
    entropies: list = field(default_factory=list)
    rewards: list = field(default_factory=list)


class A2CAgent:
    def __init__(self, gamma=0.9, entropy_coef=0.01, value_coef=1.0):
        self.net = ActorCritic()
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=3e-3)
        self.gamma, self.entropy_coef, self.value_coef = gamma, entropy_coef, value_coef
        self.rollout = Rollout()

    def act(self, obs):
        logits, value = self.net(obs)
        dist = torch.distributions.Categorical(logits=logits)
        action = dist.sample()
        self.rollout.log_probs.append(dist.log_prob(action))
        self.rollout.values.append(value)
        self.rollout.entropies.append(dist.entropy())
        return int(action)

    def _discounted_returns(self):
        out, running = [], 0.0
        for r in reversed(self.rollout.rewards):
            running = r + self.gamma * running
            out.append(running)
        return torch.tensor(out[::-1])

    def compute_losses(self):
        returns = self._discounted_returns()
        values = torch.stack(self.rollout.values)
        advantages = returns - values.detach()
        log_probs = torch.stack(self.rollout.log_probs)
        entropy = torch.stack(self.rollout.entropies).mean()
        actor_loss = -(log_probs * advantages).mean() - self.entropy_coef * entropy
        critic_loss = self.value_coef * F.mse_loss(values, returns)
        return actor_loss, critic_loss

    def update(self):
        actor_loss, critic_loss = self.compute_losses()
        self.optimizer.zero_grad()
        actor_loss.backward()
        critic_loss.backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
        self.optimizer.step()
        self.rollout = Rollout()
        return actor_loss.item(), critic_loss.item()


env = ToyEnv()
agent = A2CAgent()
obs = env.obs
for update in range(60):
    for t in range(HORIZON):
        action = agent.act(obs)
        obs, reward = env.step(action)
        agent.rollout.rewards.append(reward)
    a_loss, c_loss = agent.update()
    if update % 20 == 0:
        print(f"update {update}: actor {a_loss:.4f} critic {c_loss:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(agent.net):.8f}")
