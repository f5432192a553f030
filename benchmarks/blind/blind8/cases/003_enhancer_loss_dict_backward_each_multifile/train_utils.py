"""Small training helpers shared by the enhancement experiments."""
import torch


class MultiLossStep:
    """One optimisation step for a model trained with several weighted losses.

    ``losses`` is a dict name -> scalar loss tensor; each one is scaled by its
    weight and backpropagated, the gradients are clipped and the optimizer steps.
    """

    def __init__(self, optimizer, weights=None, max_grad_norm=None):
        self.optimizer = optimizer
        self.weights = dict(weights or {})
        self.max_grad_norm = max_grad_norm

    @property
    def params(self):
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def __call__(self, losses):
        self.optimizer.zero_grad()
        for name, loss in losses.items():
            (self.weights.get(name, 1.0) * loss).backward()
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        self.optimizer.step()
        return {name: loss.item() for name, loss in losses.items()}
