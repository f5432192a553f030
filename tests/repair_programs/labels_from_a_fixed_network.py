"""Regression onto labels that a fixed random network gives the inputs once, before the loop,
with a little noise: the labels carry the labelling network's graph, and the second minibatch's
backward walks it again. Repeating the labelling inside the loop also runs, but draws new
noise each time (other data). The expert builds the labels under torch.no_grad(): their graph
reaches no parameter that an optimizer steps."""
import torch

torch.manual_seed(0)
labeller = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
inputs = torch.randn(64, 3)
labels = labeller(inputs) + 0.05 * torch.randn(64, 1)

student = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(student.parameters(), lr=0.1)
for epoch in range(2):
    for k in range(0, 64, 16):
        x, y = inputs[k:k + 16], labels[k:k + 16]
        loss = (student(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
print("done", student.weight.sum().item())
