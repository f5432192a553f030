"""A model object whose backward method retains the graph of the output it keeps in a field;
no later backward walks that graph again. The expert drops ``retain_graph=True``."""
import torch

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.05)


class Model:
    def forward(self, x):
        self.out = net(x)

    def backward(self, y):
        self.loss = (self.out - y).pow(2).mean()
        self.loss.backward()


model = Model()
for step in range(12):
    x = torch.randn(16, 3)
    model.forward(x)
    opt.zero_grad()
    model.backward(x.sum(1, keepdim=True))
    opt.step()
print("loss", model.loss.item())
