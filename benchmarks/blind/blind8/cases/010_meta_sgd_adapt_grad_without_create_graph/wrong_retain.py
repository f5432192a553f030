"""Meta-SGD on sine-wave regression: a functional MLP learner, per-parameter inner learning
rates that are meta-learned, two inner adaptation steps per task."""
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)


class Learner(nn.Module):
    """MLP whose forward can run with an explicit list of (fast) weights."""

    def __init__(self, config=((1, 32), (32, 32), (32, 1))):
        super().__init__()
        self.vars = nn.ParameterList()
        for n_in, n_out in config:
            w = torch.empty(n_out, n_in)
            nn.init.kaiming_normal_(w)
            self.vars.append(nn.Parameter(w))
            self.vars.append(nn.Parameter(torch.zeros(n_out)))

    def forward(self, x, vars=None):
        vars = list(self.vars) if vars is None else vars
        n = len(vars) // 2
        for i in range(n):
            x = F.linear(x, vars[2 * i], vars[2 * i + 1])
            if i < n - 1:
                x = F.relu(x)
        return x


class MetaSGD(nn.Module):
    def __init__(self, update_step=2, meta_lr=2e-3, init_inner_lr=0.02):
        super().__init__()
        self.net = Learner()
        self.update_step = update_step
        self.inner_lrs = nn.ParameterList([nn.Parameter(torch.full_like(p, init_inner_lr)) for p in self.net.vars])
        self.meta_optim = torch.optim.Adam(self.parameters(), lr=meta_lr)

    def adapt(self, x_spt, y_spt):
        fast_weights = list(self.net.vars)
        for _ in range(self.update_step):
            loss = F.mse_loss(self.net(x_spt, fast_weights), y_spt)
            grad = torch.autograd.grad(loss, fast_weights, retain_graph=True)
            fast_weights = [w - lr * g for w, lr, g in zip(fast_weights, self.inner_lrs, grad)]
        return fast_weights

    def forward(self, x_spt, y_spt, x_qry, y_qry):
        task_num = x_spt.size(0)
        loss_q = 0.0
        for i in range(task_num):
            fast_weights = self.adapt(x_spt[i], y_spt[i])
            loss_q = loss_q + F.mse_loss(self.net(x_qry[i], fast_weights), y_qry[i])
        loss_q = loss_q / task_num
        self.meta_optim.zero_grad()
        loss_q.backward()
        self.meta_optim.step()
        return loss_q.item()


def sample_tasks(task_num=4, k_spt=10, k_qry=10):
    amp = torch.rand(task_num, 1, 1) * 4.9 + 0.1
    phase = torch.rand(task_num, 1, 1) * torch.pi
    x = torch.rand(task_num, k_spt + k_qry, 1) * 10 - 5
    y = amp * torch.sin(x - phase)
    return x[:, :k_spt], y[:, :k_spt], x[:, k_spt:], y[:, k_spt:]


maml = MetaSGD()
for step in range(150):
    loss = maml(*sample_tasks())
    if step % 50 == 0:
        print(f"step {step}: query loss {loss:.4f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(maml):.8f}")
