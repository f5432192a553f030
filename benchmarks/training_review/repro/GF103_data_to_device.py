# ok: DDPG-style update whose batch is created by torch and moved with `.to(device)`.
# `obs` is data; `obs.to(device)` is still data (graphfix takes it as UNKNOWN, then as a graph).
import torch, torch.nn as nn
torch.manual_seed(0)
device = torch.device("cpu")
actor = nn.Sequential(nn.Linear(3, 1), nn.Tanh())
critic = nn.Bilinear(3, 1, 1)
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3)
opt_a = torch.optim.Adam(actor.parameters(), lr=1e-3)
for _ in range(3):
    obs = torch.randn(8, 3)
    state = obs.to(device)
    action, target = torch.randn(8, 1), torch.randn(8, 1)
    critic_loss = ((critic(state, action) - target) ** 2).mean()
    opt_c.zero_grad(); critic_loss.backward(); opt_c.step()
    actor_loss = -critic(state, actor(state)).mean()
    opt_a.zero_grad(); actor_loss.backward(); opt_a.step()
print("ran", round(actor_loss.item(), 4))
