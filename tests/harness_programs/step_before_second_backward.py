import torch

net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
loss = net(torch.ones(4, 2)).sum()
loss.backward(retain_graph=True)
opt.step()
loss.backward()
