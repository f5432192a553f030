"""OML / MRCL-style meta-learning of a representation for online (continual) regression.

The representation network (RLN) is meta-learned; the prediction network (PLN) is adapted
online with fast weights, one SGD step per incoming sample, and the meta-loss is taken on the
trajectory plus a random "remember" set after the inner updates.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

N_FUNCS, IN_DIM, FEAT = 10, 11, 32


class Learner(nn.Module):
    def __init__(self):
        super().__init__()
        self.rln = nn.Sequential(nn.Linear(IN_DIM, 48), nn.ReLU(), nn.Linear(48, FEAT), nn.ReLU())
        self.pln = nn.ParameterList([
            nn.Parameter(torch.randn(32, FEAT) * (1 / math.sqrt(FEAT))), nn.Parameter(torch.zeros(32)),
            nn.Parameter(torch.randn(1, 32) * (1 / math.sqrt(32))), nn.Parameter(torch.zeros(1)),
        ])

    def forward(self, x, pln_weights=None):
        w1, b1, w2, b2 = self.pln if pln_weights is None else pln_weights
        h = self.rln(x)
        return F.linear(F.relu(F.linear(h, w1, b1)), w2, b2)


class MetaLearnerRegression(nn.Module):
    def __init__(self, update_lr=0.03, meta_lr=1e-3, update_step=5):
        super().__init__()
        self.net = Learner()
        self.update_lr, self.update_step = update_lr, update_step
        self.meta_optim = torch.optim.Adam(self.net.parameters(), lr=meta_lr)

    def inner_update(self, x, y, fast_weights):
        loss = F.mse_loss(self.net(x, fast_weights), y)
        grad = torch.autograd.grad(loss, fast_weights, retain_graph=True)
        return [w - self.update_lr * g for w, g in zip(fast_weights, grad)]

    def meta_step(self, x_traj, y_traj, x_rand, y_rand):
        fast_weights = list(self.net.pln)
        for k in range(self.update_step):
            fast_weights = self.inner_update(x_traj[k], y_traj[k], fast_weights)
        x_meta = torch.cat([x_rand, x_traj.reshape(-1, IN_DIM)])
        y_meta = torch.cat([y_rand, y_traj.reshape(-1, 1)])
        meta_loss = F.mse_loss(self.net(x_meta, fast_weights), y_meta)
        self.meta_optim.zero_grad()
        meta_loss.backward()
        self.meta_optim.step()
        return meta_loss.item()


class SineStream:
    """Each function id f has its own amplitude / phase; inputs = (z, one-hot(f))."""

    def __init__(self):
        self.amp = torch.rand(N_FUNCS) * 4.9 + 0.1
        self.phase = torch.rand(N_FUNCS) * math.pi

    def sample(self, fid, n):
        z = torch.rand(n, 1) * 10 - 5
        x = torch.cat([z, F.one_hot(torch.full((n,), fid), N_FUNCS).float()], 1)
        return x, self.amp[fid] * torch.sin(z + self.phase[fid])

    def trajectory(self, steps, per_step=8):
        fids = torch.randperm(N_FUNCS)[:steps]
        xs, ys = zip(*[self.sample(int(f), per_step) for f in fids])
        return torch.stack(xs), torch.stack(ys)

    def remember_set(self, n=40):
        xs, ys = zip(*[self.sample(int(f), 1) for f in torch.randint(0, N_FUNCS, (n,))])
        return torch.cat(xs), torch.cat(ys)


stream = SineStream()
maml = MetaLearnerRegression()
for step in range(80):
    x_traj, y_traj = stream.trajectory(maml.update_step)
    x_rand, y_rand = stream.remember_set()
    loss = maml.meta_step(x_traj, y_traj, x_rand, y_rand)
    if step % 40 == 0:
        print(f"meta step {step}: meta-loss {loss:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(maml.net):.8f}")
