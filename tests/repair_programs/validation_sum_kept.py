"""A trainer whose validation pass runs with autograd on and sums the loss tensors; the
training loop keeps the returned sum (for the learning-rate schedule) through the next epoch,
and with it the graphs of every validation batch, which no backward walks. The expert sums
numbers (``.item()``); the numbers of training do not change."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
train = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(6)]
val = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(4)]


def validate():
    total = 0
    for x, y in val:
        total += (model(x) - y).pow(2).mean()
    return total / len(val)


for epoch in range(4):
    for x, y in train:
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    val_loss = validate()
    print(epoch, float(val_loss))
print("done", model[0].weight.sum().item())
