"""Synchronous advantage actor-critic on a toy contextual bandit, with running loss statistics."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 48), nn.Tanh())
        self.pi = nn.Linear(48, 4)
        self.v = nn.Linear(48, 1)

    def forward(self, s):
        h = self.body(s)
        return self.pi(h), self.v(h).squeeze(1)


def env_reward(s, a):
    best = s[:, :4].argmax(1)
    return (a == best).float() + 0.1 * s[:, 4]


model = ActorCritic()
optimizer = torch.optim.RMSprop(model.parameters(), lr=7e-4, alpha=0.99, eps=1e-5)
stats = {"loss": 0.0, "policy": 0.0, "value": 0.0, "entropy": 0.0}
loss_sum, n_updates = 0.0, 0

for update in range(200):
    s = torch.randn(32, 6)
    logits, values = model(s)
    dist = torch.distributions.Categorical(logits=logits)
    actions = dist.sample()
    returns = env_reward(s, actions)
    advantages = returns - values
    policy_loss = -(advantages.detach() * dist.log_prob(actions)).mean()
    value_loss = advantages.pow(2).mean()
    entropy = dist.entropy().mean()

    loss = policy_loss + 0.5 * value_loss
    loss = loss - 0.01 * entropy
    optimizer.zero_grad()
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    optimizer.step()

    loss_sum += loss.item()
    n_updates += 1
    for name, value in (("loss", loss), ("policy", policy_loss), ("value", value_loss), ("entropy", entropy)):
        stats[name] += value.item()
    if update % 50 == 49:
        print(f"update {update}: " + ", ".join(f"{k} {v / 50:.4f}" for k, v in stats.items()) + f" (mean loss {loss_sum / n_updates:.4f})")
        stats = dict.fromkeys(stats, 0.0)


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(model):.8f}")
