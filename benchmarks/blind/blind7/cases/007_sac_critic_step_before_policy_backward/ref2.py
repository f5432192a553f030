"""Soft actor-critic update on a replay batch of a toy continuous-control task."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

OBS, ACT, BATCH = 6, 2, 64
GAMMA, ALPHA, TAU = 0.99, 0.2, 0.05


def mlp(i, o, h=32):
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, o))


class QNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(OBS + ACT, 1)

    def forward(self, obs, act):
        return self.net(torch.cat([obs, act], -1)).squeeze(-1)


class GaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = mlp(OBS, 2 * ACT)

    def sample(self, obs):
        mu, log_std = self.net(obs).chunk(2, -1)
        std = log_std.clamp(-5, 2).exp()
        dist = torch.distributions.Normal(mu, std)
        u = dist.rsample()
        action = torch.tanh(u)
        log_prob = (dist.log_prob(u) - torch.log(1 - action.pow(2) + 1e-6)).sum(-1)
        return action, log_prob


class SACAgent:
    def __init__(self):
        self.policy = GaussianPolicy()
        self.q1, self.q2 = QNetwork(), QNetwork()
        self.q1_target, self.q2_target = QNetwork(), QNetwork()
        self.q1_target.load_state_dict(self.q1.state_dict())
        self.q2_target.load_state_dict(self.q2.state_dict())
        self.policy_opt = torch.optim.Adam(self.policy.parameters(), lr=3e-4)
        self.q1_opt = torch.optim.Adam(self.q1.parameters(), lr=3e-4)
        self.q2_opt = torch.optim.Adam(self.q2.parameters(), lr=3e-4)

    @staticmethod
    def _perform_update(loss, opt, network):
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(network.parameters(), 10.0)
        opt.step()

    def _soft_update(self):
        with torch.no_grad():
            for net, tgt in ((self.q1, self.q1_target), (self.q2, self.q2_target)):
                for p, tp in zip(net.parameters(), tgt.parameters()):
                    tp.mul_(1 - TAU).add_(TAU * p)

    def update(self, obs, act, rew, next_obs, done):
        new_act, log_pi = self.policy.sample(obs)

        # critic losses
        with torch.no_grad():
            next_act, next_log_pi = self.policy.sample(next_obs)
            q_next = torch.min(self.q1_target(next_obs, next_act), self.q2_target(next_obs, next_act))
            q_target = rew + GAMMA * (1 - done) * (q_next - ALPHA * next_log_pi)
        qf1_loss = F.mse_loss(self.q1(obs, act), q_target)
        qf2_loss = F.mse_loss(self.q2(obs, act), q_target)

        # update networks
        self._perform_update(qf1_loss, self.q1_opt, self.q1)
        self._perform_update(qf2_loss, self.q2_opt, self.q2)
        # policy loss against the updated critics
        q_new = torch.min(self.q1(obs, new_act), self.q2(obs, new_act))
        policy_loss = (ALPHA * log_pi - q_new).mean()
        self._perform_update(policy_loss, self.policy_opt, self.policy)
        self._soft_update()
        return qf1_loss.item(), policy_loss.item()


def replay_batch():
    obs = torch.randn(BATCH, OBS)
    act = torch.rand(BATCH, ACT) * 2 - 1
    rew = -(obs[:, :ACT] - act).pow(2).sum(-1)
    next_obs = obs + 0.1 * torch.randn(BATCH, OBS)
    done = (torch.rand(BATCH) < 0.05).float()
    return obs, act, rew, next_obs, done


agent = SACAgent()
for it in range(60):
    q, pi = agent.update(*replay_batch())
    if it % 20 == 0:
        print(f"iter {it}: q1 loss {q:.4f} policy loss {pi:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(agent.policy, agent.q1, agent.q2):.8f}")
