"""ok: `imgs` is rebound by the `for` header at the start of every pass; its reassignment from
an encoder output later in the body never reaches the next pass."""
import torch
from torch import nn

torch.manual_seed(0)
encoder, head = nn.Linear(6, 4), nn.Linear(4, 2)
opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=0.1)
batches = [(torch.randn(5, 6), torch.randint(0, 2, (5,))) for _ in range(3)]
for i, (imgs, labels) in enumerate(batches):
    imgs = imgs.float()
    imgs = encoder(imgs)
    loss = nn.functional.cross_entropy(head(imgs), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("ok")
