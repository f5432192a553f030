"""Its look-alike, where the gradient must flow: a head trained on features that ``attach``
computes once into the batch's field with an encoder the same optimizer trains, and nothing else
trains that encoder. Detaching the stored features would run but freeze the encoder: the repair
must refuse it. The expert computes the features inside the loop."""
from dataclasses import dataclass
from typing import Optional

import torch

torch.manual_seed(0)


@dataclass
class Batch:
    x: torch.Tensor
    y: torch.Tensor
    feats: Optional[torch.Tensor] = None


class Model:
    def __init__(self):
        self.enc = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh())
        self.head = torch.nn.Linear(8, 1)
        self.opt = torch.optim.SGD([*self.enc.parameters(), *self.head.parameters()], lr=0.05)

    def attach(self, batch):
        batch.feats = self.enc(batch.x)

    def fit(self, batch, epochs=3):
        self.attach(batch)
        for _ in range(epochs):
            loss = (self.head(batch.feats).squeeze(1) - batch.y).pow(2).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


model = Model()
x = torch.randn(16, 4)
model.fit(Batch(x, x.sum(1)))
print("done", model.enc[0].weight.sum().item())
