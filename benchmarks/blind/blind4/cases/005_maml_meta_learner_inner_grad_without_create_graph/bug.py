"""Second-order MAML on sine-wave regression tasks, with a functional learner and a Meta wrapper class."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Learner(nn.Module):
    """MLP whose forward can run on an explicit list of weights (the adapted fast weights)."""

    def __init__(self, hidden=40):
        super().__init__()
        self.vars = nn.ParameterList()
        for fan_in, fan_out in [(1, hidden), (hidden, hidden), (hidden, 1)]:
            w = nn.Parameter(torch.empty(fan_out, fan_in))
            nn.init.kaiming_normal_(w)
            self.vars.append(w)
            self.vars.append(nn.Parameter(torch.zeros(fan_out)))

    def forward(self, x, vars=None):
        vars = list(self.vars) if vars is None else vars
        for i in range(0, len(vars), 2):
            x = F.linear(x, vars[i], vars[i + 1])
            if i + 2 < len(vars):
                x = F.relu(x)
        return x


class Meta:
    def __init__(self, update_lr=0.02, meta_lr=1e-3, update_step=3):
        self.net = Learner()
        self.meta_optim = torch.optim.Adam(self.net.parameters(), lr=meta_lr)
        self.update_lr, self.update_step = update_lr, update_step

    def adapt(self, x_spt, y_spt):
        fast_weights = list(self.net.vars)
        for _ in range(self.update_step):
            loss = F.mse_loss(self.net(x_spt, fast_weights), y_spt)
            grad = torch.autograd.grad(loss, fast_weights)
            fast_weights = [w - self.update_lr * g for w, g in zip(fast_weights, grad)]
        return fast_weights

    def meta_step(self, tasks):
        losses_q = []
        for x_spt, y_spt, x_qry, y_qry in tasks:
            fast_weights = self.adapt(x_spt, y_spt)
            losses_q.append(F.mse_loss(self.net(x_qry, fast_weights), y_qry))
        loss_q = torch.stack(losses_q).mean()
        self.meta_optim.zero_grad()
        loss_q.backward()
        self.meta_optim.step()
        return loss_q.item()


def sample_tasks(gen, n_tasks=4, k_spt=10, k_qry=10):
    tasks = []
    for _ in range(n_tasks):
        amp = 0.1 + 4.9 * torch.rand(1, generator=gen)
        phase = 3.14 * torch.rand(1, generator=gen)
        x = 10 * torch.rand(k_spt + k_qry, 1, generator=gen) - 5
        y = amp * torch.sin(x + phase)
        tasks.append((x[:k_spt], y[:k_spt], x[k_spt:], y[k_spt:]))
    return tasks


meta = Meta()
gen = torch.Generator().manual_seed(2)
for it in range(80):
    loss_q = meta.meta_step(sample_tasks(gen))
    if it % 20 == 0:
        print(f"meta-iter {it}: query mse {loss_q:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(meta.net):.8f}")
