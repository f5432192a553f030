"""A head that caches its encoder's features of a fixed batch, computed once in ``setup``:
the second step backpropagates into the first one's freed graph. Detaching the cache would run,
but freeze the encoder, which the first step trained: the repair must refuse it, and no other
candidate applies (the batch is not in ``forward``'s reach)."""
import torch

torch.manual_seed(0)


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Linear(4, 4)
        self.out = torch.nn.Linear(4, 1)

    def setup(self, batch):
        self.memo = torch.relu(self.enc(batch))

    def forward(self, scale):
        return self.out(self.memo * scale)


head = Head()
opt = torch.optim.SGD(head.parameters(), lr=0.1)
head.setup(torch.randn(8, 4))
for step in range(3):
    loss = head(1.0 + step).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
