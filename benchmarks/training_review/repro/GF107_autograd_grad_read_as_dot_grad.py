# GF107 false positive: the function reference `torch.autograd.grad` is read as a tensor's `.grad`.
# A main backward, then a separate regulariser on a FRESH forward whose gradient is taken with
# autograd.grad(create_graph=True). The main backward's .grad is never read.
import torch

torch.manual_seed(0)
net = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(8, 4)

opt.zero_grad()
main = net(x).mean()
main.backward()                      # graphfix: GF107 wants create_graph=True here

inp = torch.randn(8, 4).requires_grad_(True)
g = torch.autograd.grad(outputs=[net(inp).sum()], inputs=[inp], create_graph=True)[0]
penalty = g.square().sum(1).mean()
penalty.backward()
opt.step()
print([round(p.grad.abs().sum().item(), 4) for p in net.parameters()])
