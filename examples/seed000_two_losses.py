"""Multi-task network: two heads share one trunk and each loss is backwarded on its own.

The first backward frees the trunk's saved tensors, so the second raises
"Trying to backward through the graph a second time".
"""

import torch
from torch import nn


class MultiTaskNet(nn.Module):
    def __init__(self, features: int = 8, hidden: int = 16, classes: int = 3) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(features, hidden), nn.ReLU())
        self.classify = nn.Linear(hidden, classes)
        self.regress = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shared = self.trunk(x)
        return self.classify(shared), self.regress(shared)


torch.manual_seed(0)
model = MultiTaskNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
inputs = torch.randn(32, 8)
labels = torch.randint(0, 3, (32,))
scores = torch.randn(32, 1)

for epoch in range(5):
    logits, predicted = model(inputs)
    class_loss = nn.functional.cross_entropy(logits, labels)
    score_loss = nn.functional.mse_loss(predicted, scores)
    optimizer.zero_grad()
    # backpropagate both task losses
    class_loss.backward()
    score_loss.backward()
    optimizer.step()
    print(f"epoch {epoch}: class {class_loss.item():.4f} score {score_loss.item():.4f}")
