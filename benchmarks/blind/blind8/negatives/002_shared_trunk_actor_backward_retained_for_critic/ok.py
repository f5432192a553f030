"""Off-policy actor-critic with a shared sequence encoder (TD3-style deterministic actor).
The actor loss is backpropagated first, the critic's share of it is discarded, then the
critic loss is backpropagated through the same encoder graph; one optimizer step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)

OBS, ACT, HID = 6, 2, 32


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.traj_encoder = nn.GRU(OBS, HID, batch_first=True)
        self.actor = nn.Sequential(nn.Linear(HID, HID), nn.ReLU(), nn.Linear(HID, ACT), nn.Tanh())
        self.critics = nn.ModuleList([nn.Sequential(nn.Linear(HID + ACT, HID), nn.ReLU(), nn.Linear(HID, 1))
                                      for _ in range(2)])

    def q(self, s, a):
        return torch.stack([c(torch.cat([s, a], -1)) for c in self.critics]).min(0).values

    def compute_losses(self, obs, act, rew, gamma=0.9):
        s, _ = self.traj_encoder(obs)                           # shared by actor and critics
        a_pi = self.actor(s)
        actor_loss = -self.q(s, a_pi).mean()
        q_pred = torch.stack([c(torch.cat([s, act], -1)) for c in self.critics])
        with torch.no_grad():
            target = rew[:, :-1] + gamma * self.q(s[:, 1:], self.actor(s[:, 1:]))
        critic_loss = F.mse_loss(q_pred[:, :, :-1], target.expand_as(q_pred[:, :, :-1]))
        return actor_loss, critic_loss


def train_step(agent, optimizer, batch):
    actor_loss, critic_loss = agent.compute_losses(*batch)
    optimizer.zero_grad()
    # the actor's objective must not move the critics: backprop it first,
    # drop what it put into the critic heads, then add the critic loss
    actor_loss.backward(retain_graph=True)
    for p in agent.critics.parameters():
        p.grad = None
    critic_loss.backward()
    nn.utils.clip_grad_norm_(agent.parameters(), 1.0)
    optimizer.step()
    return actor_loss.item(), critic_loss.item()


def make_batch(bs=16, T=10):
    obs = torch.randn(bs, T, OBS)
    act = torch.rand(bs, T, ACT) * 2 - 1
    rew = -(obs[..., :ACT] - act).pow(2).sum(-1, keepdim=True)
    return obs, act, rew


agent = Agent()
optimizer = torch.optim.Adam(agent.parameters(), lr=1e-3)
batches = [make_batch() for _ in range(20)]
for epoch in range(4):
    for batch in batches:
        a, c = train_step(agent, optimizer, batch)
    print(f"epoch {epoch}: actor {a:.4f} critic {c:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(agent):.8f}")
