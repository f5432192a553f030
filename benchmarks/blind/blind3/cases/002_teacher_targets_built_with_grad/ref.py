"""Student/teacher regression on synthetic data: a random 'true' network labels the inputs once,
then a student MLP is fitted to those labels with minibatch SGD."""
import torch
import torch.nn as nn

torch.manual_seed(0)

num_samples, num_features, num_outputs = 2000, 4, 2
batch_size, lr, num_epochs = 50, 0.05, 3

# the data-generating ("true") network
true_net = nn.Sequential(nn.Linear(num_features, 16), nn.Tanh(), nn.Linear(16, num_outputs))
X = torch.randn(num_samples, num_features)
with torch.no_grad():
    Y = true_net(X) + 0.01 * torch.randn(num_samples, num_outputs)

student = nn.Sequential(nn.Linear(num_features, 32), nn.ReLU(), nn.Linear(32, num_outputs))
optimizer = torch.optim.SGD(student.parameters(), lr=lr, momentum=0.9)
loss_fn = nn.MSELoss()

for epoch in range(num_epochs):
    perm = torch.randperm(num_samples)
    for k in range(0, num_samples, batch_size):
        idx = perm[k:k + batch_size]
        x, y = X[idx], Y[idx]
        l = loss_fn(student(x), y)
        optimizer.zero_grad()
        l.backward()
        optimizer.step()
    with torch.no_grad():
        print(f"epoch {epoch + 1}, loss {loss_fn(student(X), Y).item():.6f}")


def param_checksum(*modules):
    return sum(float(p.detach().double().abs().sum()) for m in modules for p in m.parameters())


print(f"CHECKSUM {param_checksum(student):.8f}")
