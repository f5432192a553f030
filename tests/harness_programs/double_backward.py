# Harness check: backward twice through a graph whose buffers are freed must be reported.
import torch
from torch import nn

model = nn.Linear(5, 2)
loss = nn.functional.cross_entropy(model(torch.randn(3, 5)), torch.tensor([0, 1, 1]))
loss.backward()
loss.backward()
