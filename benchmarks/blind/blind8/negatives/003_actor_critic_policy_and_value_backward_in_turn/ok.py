"""Episodic advantage actor-critic on a small corridor task, with separate actor and critic
networks wrapped in one module; the policy loss and the value loss are backpropagated one
after the other before a single optimizer step."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributions as distributions

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)

N_STATES, GOAL, MAX_T = 8, 7, 20


class MLP(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim):
        super().__init__()
        self.fc_1 = nn.Linear(input_dim, hidden_dim)
        self.fc_2 = nn.Linear(hidden_dim, output_dim)

    def forward(self, x):
        return self.fc_2(F.relu(self.fc_1(x)))


class ActorCritic(nn.Module):
    def __init__(self, actor, critic):
        super().__init__()
        self.actor = actor
        self.critic = critic

    def forward(self, state):
        return self.actor(state), self.critic(state)


def one_hot(s):
    return F.one_hot(torch.tensor([s]), N_STATES).double()


def run_episode(policy):
    s, log_prob_actions, values, rewards = 0, [], [], []
    for _ in range(MAX_T):
        action_pred, value_pred = policy(one_hot(s))
        dist = distributions.Categorical(logits=action_pred)
        action = dist.sample()
        log_prob_actions.append(dist.log_prob(action))
        values.append(value_pred)
        s = max(0, min(N_STATES - 1, s + (1 if action.item() == 1 else -1)))
        rewards.append(1.0 if s == GOAL else -0.05)
        if s == GOAL:
            break
    return torch.cat(log_prob_actions), torch.cat(values).squeeze(-1), rewards


def calculate_returns(rewards, discount_factor=0.95):
    returns, R = [], 0.0
    for r in reversed(rewards):
        R = r + R * discount_factor
        returns.insert(0, R)
    return torch.tensor(returns)


def update_policy(returns, log_prob_actions, values, optimizer):
    returns = returns.detach()
    advantages = returns - values.detach()
    policy_loss = -(advantages * log_prob_actions).sum()
    value_loss = F.smooth_l1_loss(values, returns).sum()
    optimizer.zero_grad()
    policy_loss.backward()
    value_loss.backward()
    optimizer.step()
    return policy_loss.item(), value_loss.item()


policy = ActorCritic(MLP(N_STATES, 32, 2), MLP(N_STATES, 32, 1))
optimizer = torch.optim.Adam(policy.parameters(), lr=5e-3)
lengths = []
for episode in range(120):
    log_prob_actions, values, rewards = run_episode(policy)
    p_loss, v_loss = update_policy(calculate_returns(rewards), log_prob_actions, values, optimizer)
    lengths.append(len(rewards))
    if episode % 40 == 0:
        print(f"episode {episode}: length {len(rewards)} policy {p_loss:.4f} value {v_loss:.4f}")
print(f"mean length of the last 20 episodes: {sum(lengths[-20:]) / 20:.2f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(policy):.8f}")
