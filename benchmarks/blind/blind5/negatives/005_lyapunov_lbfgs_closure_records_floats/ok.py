"""Learn a neural Lyapunov function V(x) for a damped pendulum with L-BFGS: the closure returns the
loss tensor to the optimizer and records the loss history as Python floats."""
import torch
import torch.nn as nn

torch.manual_seed(0)


def pendulum(x, damping=0.5):
    theta, omega = x[:, 0], x[:, 1]
    return torch.stack([omega, -torch.sin(theta) - damping * omega], 1)


class LyapunovNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 8))

    def forward(self, x):
        return (self.phi(x) - self.phi(torch.zeros(1, 2))).pow(2).sum(1) + 0.01 * x.pow(2).sum(1)


class LyapunovTrainer:
    def __init__(self, V, samples, margin=0.05):
        self.V, self.samples, self.margin = V, samples, margin
        self.optimizer = torch.optim.LBFGS(V.parameters(), lr=0.5, max_iter=10, history_size=10,
                                           line_search_fn="strong_wolfe")
        self.losses = []

    def lyapunov_loss(self):
        x = self.samples.clone().requires_grad_(True)
        v = self.V(x)
        dv_dx, = torch.autograd.grad(v.sum(), x, create_graph=True)
        vdot = (dv_dx * pendulum(x)).sum(1)
        decrease = torch.relu(vdot + self.margin * v).mean()
        positivity = torch.relu(0.1 * x.pow(2).sum(1) - v).mean()
        return decrease + positivity

    def closure(self):
        self.optimizer.zero_grad()
        loss = self.lyapunov_loss()
        loss.backward()
        self.losses.append(loss.item())
        return loss

    def train(self, n_outer=12):
        for it in range(n_outer):
            loss = self.optimizer.step(self.closure)
            if it % 4 == 0:
                print(f"outer {it}: loss {float(loss):.6f} ({len(self.losses)} closure calls)")


V = LyapunovNet()
trainer = LyapunovTrainer(V, torch.rand(256, 2) * 4 - 2)
trainer.train()


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(V):.8f}")
