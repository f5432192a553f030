# pytorch/examples' actor-critic shape: one forward and a Categorical sample per environment step,
# the episode's (log_prob, value) pairs kept in a list emptied after each update.
import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine = nn.Linear(4, 32)
        self.action_head, self.value_head = nn.Linear(32, 2), nn.Linear(32, 1)
        self.saved_actions, self.rewards = [], []

    def forward(self, x):
        x = torch.relu(self.affine(x))
        return torch.softmax(self.action_head(x), dim=-1), self.value_head(x)


model = Policy()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
for episode in range(12):
    state = torch.randn(4)
    for t in range(50):
        probs, value = model(state)
        m = Categorical(probs)
        action = m.sample()
        model.saved_actions.append((m.log_prob(action), value))
        state = torch.randn(4)
        model.rewards.append(float(action.item() == 1))
    R, returns = 0.0, []
    for r in model.rewards[::-1]:
        R = r + 0.99 * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    policy_losses, value_losses = [], []
    for (log_prob, value), R in zip(model.saved_actions, returns):
        advantage = R - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(nn.functional.smooth_l1_loss(value, torch.tensor([R])))
    optimizer.zero_grad()
    loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
    loss.backward()
    optimizer.step()
    del model.rewards[:], model.saved_actions[:]
