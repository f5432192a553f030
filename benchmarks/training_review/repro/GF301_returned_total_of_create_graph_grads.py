# GF301 false positive (and gradient-changing fix): a helper sums per-dimension gradients taken with
# create_graph=True (a Jacobian trace / divergence) and RETURNS the sum; the caller puts it in the
# loss and backpropagates it. The total is meant to carry the graph; `.detach()` drops its gradient.
import torch


def divergence(f, z):
    total = 0.
    for i in range(z.shape[1]):
        total += torch.autograd.grad(f[:, i].sum(), z, create_graph=True)[0][:, i]
    return total


torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
z = torch.randn(16, 2, requires_grad=True)
loss = divergence(net(z), z).pow(2).mean()
loss.backward()
print(round(net[0].weight.grad.abs().sum().item(), 6))
