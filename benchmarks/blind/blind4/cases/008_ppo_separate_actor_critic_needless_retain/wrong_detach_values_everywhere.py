"""PPO with separate actor and critic networks and one optimizer each (GAE on a toy random-walk task)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

OBS_DIM, N_ACTIONS = 6, 3


class ActorCritic(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(OBS_DIM, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                   nn.Linear(hidden, N_ACTIONS))
        self.critic = nn.Sequential(nn.Linear(OBS_DIM, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                    nn.Linear(hidden, 1))

    @torch.no_grad()
    def act(self, obs):
        dist = torch.distributions.Categorical(logits=self.actor(obs))
        action = dist.sample()
        return action, dist.log_prob(action), self.critic(obs).squeeze(-1)

    def evaluate(self, obs, actions):
        dist = torch.distributions.Categorical(logits=self.actor(obs))
        values = self.critic(obs).squeeze(-1)
        return dist.log_prob(actions), values, dist.entropy()


class Memory:
    def __init__(self):
        self.obs, self.actions, self.log_probs, self.values, self.rewards = [], [], [], [], []

    def tensors(self):
        return (torch.stack(self.obs), torch.stack(self.actions), torch.stack(self.log_probs),
                torch.stack(self.values), torch.tensor(self.rewards))


class PPO:
    def __init__(self, k_epochs=4, clip=0.2, gamma=0.95, lam=0.9):
        self.policy = ActorCritic()
        self.actor_opt = torch.optim.Adam(self.policy.actor.parameters(), lr=1e-3)
        self.critic_opt = torch.optim.Adam(self.policy.critic.parameters(), lr=3e-3)
        self.k_epochs, self.clip, self.gamma, self.lam = k_epochs, clip, gamma, lam

    def gae(self, rewards, values):
        adv, running = torch.zeros_like(rewards), 0.0
        for t in reversed(range(len(rewards))):
            next_v = values[t + 1] if t + 1 < len(values) else 0.0
            delta = rewards[t] + self.gamma * next_v - values[t]
            running = delta + self.gamma * self.lam * running
            adv[t] = running
        return adv, adv + values

    def update(self, memory):
        obs, actions, old_log_probs, old_values, rewards = memory.tensors()
        advantages, returns = self.gae(rewards, old_values)
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        for _ in range(self.k_epochs):
            log_probs, values, entropy = self.policy.evaluate(obs, actions)
            values = values.detach().requires_grad_()
            ratios = torch.exp(log_probs - old_log_probs)
            surr1 = ratios * advantages
            surr2 = torch.clamp(ratios, 1 - self.clip, 1 + self.clip) * advantages
            actor_loss = -torch.min(surr1, surr2).mean() - 0.01 * entropy.mean()
            critic_loss = 0.5 * F.mse_loss(values, returns)

            self.actor_opt.zero_grad()
            actor_loss.backward()
            self.actor_opt.step()

            self.critic_opt.zero_grad()
            critic_loss.backward()
            self.critic_opt.step()


def run(ppo, episodes=30, horizon=32):
    gen = torch.Generator().manual_seed(4)
    goal = torch.randn(OBS_DIM, generator=gen)
    for ep in range(episodes):
        memory, state = Memory(), torch.randn(OBS_DIM, generator=gen)
        for t in range(horizon):
            action, log_prob, value = ppo.policy.act(state)
            state = state + 0.3 * (int(action) - 1) * goal / goal.norm() + 0.05 * torch.randn(OBS_DIM, generator=gen)
            memory.obs.append(state)
            memory.actions.append(action)
            memory.log_probs.append(log_prob)
            memory.values.append(value)
            memory.rewards.append(float(-(state - goal).norm()))
        ppo.update(memory)
        if ep % 10 == 0:
            print(f"episode {ep}: return {sum(memory.rewards):.3f}")


ppo = PPO()
run(ppo)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(ppo.policy):.8f}")
