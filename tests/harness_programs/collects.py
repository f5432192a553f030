# Harness check: which globals end up in the state.
import torch
from torch import nn


class Holder:
    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor
        self._secret = torch.ones(1, requires_grad=True)


model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))
bag = {"holder": Holder(torch.zeros(2, requires_grad=True)), "scale": 2.0}
_private = torch.ones(1, requires_grad=True)
loss = model(torch.ones(1, 2)).sum() * bag["scale"]
loss.backward()
steps = 3
print("collected")
