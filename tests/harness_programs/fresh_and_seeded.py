# Harness check: globals hold only the three names the harness sets; cwd, sys.path[0] and seeds as for a script.
assert set(globals()) == {"__name__", "__file__", "__builtins__"}, sorted(globals())

import os
import random
import sys

import torch

assert __name__ == "__main__"
here = os.path.dirname(__file__)
assert os.getcwd() == here and sys.path[0] == here, (os.getcwd(), sys.path[0])

weights = torch.randn(3, requires_grad=True)
noise = random.random()
(weights * noise).sum().backward()
