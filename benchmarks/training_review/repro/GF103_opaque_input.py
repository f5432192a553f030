# ok: actor-critic update on a batch from an opaque sampler. `state` is data, not a graph:
# the critic loss cannot backpropagate "into the generator's graph" through it.
import torch, torch.nn as nn
torch.manual_seed(0)

class Buffer:
    def sample(self, n):
        return torch.randn(n, 3), torch.randn(n, 1), torch.randn(n, 1)

actor = nn.Sequential(nn.Linear(3, 1), nn.Tanh())
critic = nn.Bilinear(3, 1, 1)
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3)
opt_a = torch.optim.Adam(actor.parameters(), lr=1e-3)
buf = Buffer()
for _ in range(3):
    state, action, target = buf.sample(8)
    critic_loss = ((critic(state, action) - target) ** 2).mean()
    opt_c.zero_grad(); critic_loss.backward(); opt_c.step()
    actor_loss = -critic(state, actor(state)).mean()
    opt_a.zero_grad(); actor_loss.backward(); opt_a.step()
print("ran", round(actor_loss.item(), 4))
