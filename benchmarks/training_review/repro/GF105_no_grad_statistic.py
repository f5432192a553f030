"""ok: the temperature loss uses an entropy computed from the policy's output under
`torch.no_grad()`: that value carries no graph, so the temperature's backward never walks the
policy graph the actor's backward freed."""
import math
import torch
from torch import nn


class Agent:
    def __init__(self):
        self.actor = nn.Sequential(nn.Linear(4, 3), nn.Softmax(-1))
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=1e-3)
        self.log_alpha = torch.zeros((), requires_grad=True)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=1e-3)
        self.entropy = 0.0

    def train(self, s, q):
        probs = self.actor(s)
        log_probs = torch.log(probs + 1e-8)
        a_loss = (probs * (self.log_alpha.exp().detach() * log_probs - q)).sum(1)
        self.actor_opt.zero_grad()
        a_loss.mean().backward()
        self.actor_opt.step()
        with torch.no_grad():
            self.entropy = -(probs * log_probs).sum(1).mean()
        alpha_loss = self.log_alpha * (self.entropy - 0.6 * math.log(3))
        self.alpha_opt.zero_grad()
        alpha_loss.backward()
        self.alpha_opt.step()


torch.manual_seed(0)
agent = Agent()
for _ in range(3):
    agent.train(torch.randn(5, 4), torch.randn(5, 3))
print("ok")
