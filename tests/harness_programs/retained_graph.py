import torch

w = torch.randn(4, 4, requires_grad=True)
x = torch.randn(2, 4)
loss = torch.tanh(x @ w).pow(2).sum()
loss.backward(retain_graph=True)
