# GF301 true finding whose fix is not the expert's: `update()` returns `q.mean()` (a scalar that
# still carries the graph); the per-episode list is only handed to a reporting function that
# turns the values into numbers. The expert writes `.item()`; graphfix writes `.detach()`, because
# it only proves scalar-ness from a bare `.backward()` on the same name (on CUDA a detached tensor
# still cannot be turned into a NumPy value, so a plot of the list would still fail there).
import torch

torch.manual_seed(0)
q_net = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(q_net.parameters(), lr=0.01)


def update():
    q = q_net(torch.randn(16, 3))
    opt.zero_grad()
    (q - 1).pow(2).mean().backward()
    opt.step()
    return q.mean()


def report(values):
    print([round(float(v), 4) for v in values])


history = []
for episode in range(3):
    for step in range(5):
        last_q = update()
    history.append(last_q)
report(history)
