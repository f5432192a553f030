"""Soft actor-critic (twin Q, fixed temperature) on a synthetic continuous-control replay buffer.

Trainer layout follows rlkit/OAC: losses for every network are computed first from one
sampled batch, then each network is updated with its own optimizer.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

OBS, ACT = 8, 2


def mlp(i, o, h=64):
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, o))


class QFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(OBS + ACT, 1)

    def forward(self, obs, act):
        return self.net(torch.cat([obs, act], dim=1))


class TanhGaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = mlp(OBS, 2 * ACT)

    def forward(self, obs, eps):
        mean, log_std = self.trunk(obs).chunk(2, dim=1)
        log_std = log_std.clamp(-5, 2)
        std = log_std.exp()
        pre_tanh = mean + std * eps
        action = torch.tanh(pre_tanh)
        log_prob = (-0.5 * eps ** 2 - log_std - 0.9189385332).sum(1, keepdim=True)
        log_prob = log_prob - torch.log(1 - action ** 2 + 1e-6).sum(1, keepdim=True)
        return action, log_prob


class SACTrainer:
    def __init__(self, discount=0.99, alpha=0.2, tau=0.01, lr=1e-3):
        self.policy = TanhGaussianPolicy()
        self.qf = {"qf1": QFunction(), "qf2": QFunction()}
        self.target_qf = {k: QFunction() for k in self.qf}
        for k in self.qf:
            self.target_qf[k].load_state_dict(self.qf[k].state_dict())
        self.optimizers = {k: torch.optim.Adam(q.parameters(), lr=lr) for k, q in self.qf.items()}
        self.optimizers["policy"] = torch.optim.Adam(self.policy.parameters(), lr=lr)
        self.discount, self.alpha, self.tau = discount, alpha, tau

    def compute_losses(self, batch):
        obs, actions, rewards, next_obs, terminals = batch
        eps = torch.randn(obs.size(0), ACT)
        new_actions, log_pi = self.policy(obs, eps)
        q_new_actions = torch.min(self.qf["qf1"](obs, new_actions), self.qf["qf2"](obs, new_actions))
        policy_loss = (self.alpha * log_pi - q_new_actions).mean()

        with torch.no_grad():
            next_actions, next_log_pi = self.policy(next_obs, torch.randn(obs.size(0), ACT))
            target_q = torch.min(self.target_qf["qf1"](next_obs, next_actions),
                                 self.target_qf["qf2"](next_obs, next_actions)) - self.alpha * next_log_pi
            q_target = rewards + (1.0 - terminals) * self.discount * target_q
        losses = {k: F.mse_loss(q(obs, actions), q_target) for k, q in self.qf.items()}
        losses["policy"] = policy_loss
        return losses

    def train_from_batch(self, batch):
        losses = self.compute_losses(batch)
        for name in ("policy", "qf1", "qf2"):
            opt = self.optimizers[name]
            opt.zero_grad()
            losses[name].backward()
            opt.step()
        self.soft_update()
        return {k: v.item() for k, v in losses.items()}

    @torch.no_grad()
    def soft_update(self):
        for k in self.qf:
            for p, tp in zip(self.qf[k].parameters(), self.target_qf[k].parameters()):
                tp.mul_(1 - self.tau).add_(self.tau * p)


def sample_batches(n=60, bs=64):
    w = torch.randn(OBS + ACT)
    out = []
    for _ in range(n):
        obs, act = torch.randn(bs, OBS), torch.rand(bs, ACT) * 2 - 1
        rew = torch.tanh(torch.cat([obs, act], 1) @ w).unsqueeze(1)
        nxt = obs + 0.1 * torch.randn(bs, OBS)
        done = (torch.rand(bs, 1) < 0.05).float()
        out.append((obs, act, rew, nxt, done))
    return out


trainer = SACTrainer()
for it, batch in enumerate(sample_batches()):
    stats = trainer.train_from_batch(batch)
    if it % 20 == 0:
        print(f"iter {it}: " + " ".join(f"{k} {v:.4f}" for k, v in stats.items()))


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(trainer.policy, *trainer.qf.values(), *trainer.target_qf.values()):.8f}")
