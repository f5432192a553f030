"""The hidden activation of the first batch is cached in a list and reused by later batches.

The cached tensor still points into the first batch's graph, freed by its backward, so
the second batch raises "Trying to backward through the graph a second time".
"""

import torch
from torch import nn

torch.manual_seed(0)
features = torch.tensor([1.0, 2.0, 3.0])
target = torch.tensor([1.0])
encoder = nn.Linear(3, 5)
head = nn.Linear(5, 1)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(list(encoder.parameters()) + list(head.parameters()), lr=0.01)

cached = []
for step in range(10):
    hidden = encoder(features)
    prediction = head(hidden)
    cached.append(hidden)  # kept for the next steps
    if step > 0:
        prediction = prediction + cached[0].mean()
    loss = criterion(prediction, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.6f}")
