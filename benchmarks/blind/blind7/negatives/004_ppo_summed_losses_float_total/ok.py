"""PPO-style update loop: policy, value and entropy terms are summed into one loss per minibatch,
and the epoch statistics accumulate float(loss) values."""
import torch
import torch.nn as nn

torch.manual_seed(0)

OBS, ACTIONS, N = 8, 4, 256


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(OBS, 64), nn.Tanh())
        self.pi = nn.Linear(64, ACTIONS)
        self.v = nn.Linear(64, 1)

    def forward(self, obs):
        h = self.body(obs)
        return self.pi(h), self.v(h).squeeze(-1)


def make_rollout(agent):
    obs = torch.randn(N, OBS)
    with torch.no_grad():
        logits, values = agent(obs)
        dist = torch.distributions.Categorical(logits=logits)
        actions = dist.sample()
        old_logp = dist.log_prob(actions)
    rewards = (actions == obs[:, :ACTIONS].argmax(1)).float()
    advantages = rewards - values
    return obs, actions, old_logp, rewards, advantages


agent = ActorCritic()
optimizer = torch.optim.Adam(agent.parameters(), lr=3e-3)
clip, vf_coef, ent_coef = 0.2, 0.5, 0.01

for update in range(8):
    obs, actions, old_logp, returns, adv = make_rollout(agent)
    total_loss = 0
    for epoch in range(4):
        perm = torch.randperm(N)
        for i in range(0, N, 64):
            idx = perm[i:i + 64]
            logits, values = agent(obs[idx])
            dist = torch.distributions.Categorical(logits=logits)
            ratio = (dist.log_prob(actions[idx]) - old_logp[idx]).exp()
            a = (adv[idx] - adv[idx].mean()) / (adv[idx].std() + 1e-8)
            policy_loss = -torch.min(ratio * a, ratio.clamp(1 - clip, 1 + clip) * a).mean()
            value_loss = (values - returns[idx]).pow(2).mean()
            loss = policy_loss + vf_coef * value_loss - ent_coef * dist.entropy().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += float(loss)
    print(f"update {update}: mean loss {total_loss / 16:.4f} reward {returns.mean().item():.3f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(agent):.8f}")
