"""A recurrent state kept in a dict, returned by the chunk function and handed back to it: the
next chunk's loss reaches the previous chunk's freed graph. The expert detaches every tensor of
the dict where the loop receives it (truncated backpropagation through time)."""
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
data = torch.randn(3, 2, 4)


def chunk(xs, state):
    total = 0
    for x in xs:
        h = torch.tanh(model(x) + state["h"])
        state = {"h": h, "c": state["c"] + h}
        total = total + (h + state["c"]).pow(2).mean()
    return total, state


state = {"h": torch.zeros(4), "c": torch.zeros(4)}
for i in range(3):
    loss, state = chunk(data[i], state)
    state = {key: item.detach() for key, item in state.items()}
    opt.zero_grad()
    loss.backward()
    opt.step()
print("loss", loss.item())
