# TRUE, wrong fix: a shared encoder trained by the critic optimizer; the actor step reuses the
# encoder graph the critic backward freed -> "Trying to backward through the graph a second time".
# graphfix (only when the critic optimizer's parameters sit in a variable) detaches `feat` in the
# CRITIC step, which silently stops the encoder from learning. Expert fix: see *_expert.py.
import torch, torch.nn as nn
torch.manual_seed(0)
encoder = nn.Linear(5, 3)
actor = nn.Sequential(nn.Linear(3, 1), nn.Tanh())
critic = nn.Bilinear(3, 1, 1)
c_params = [*critic.parameters(), *encoder.parameters()]
opt_c = torch.optim.Adam(c_params, lr=1e-3)
opt_a = torch.optim.Adam(actor.parameters(), lr=1e-3)
for _ in range(3):
    obs, action, target = torch.randn(8, 5), torch.randn(8, 1), torch.randn(8, 1)
    feat = encoder(obs)
    critic_loss = ((critic(feat, action) - target) ** 2).mean()
    opt_c.zero_grad(); critic_loss.backward(); opt_c.step()
    actor_loss = -critic(feat, actor(feat)).mean()
    opt_a.zero_grad(); actor_loss.backward(); opt_a.step()
print("ran", round(actor_loss.item(), 4))
