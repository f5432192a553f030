"""Which parameters a run trained: at every optimizer step, the parameters whose gradient is
not None and not all zero, named by the order in which the program created them (``parameter
3 (8, 4)``: the third ``nn.Parameter`` built, its shape). A fix that changes how losses are
built but not how modules are made keeps those names, so ``graphfix run --fix`` can compare the
first run with a re-run: a detach that cuts a generator or an encoder off the loss shows as
parameters that got a gradient before and get none now (fixer.runtime.repair.trial).

The names count from the run's start; each step's set is kept for the last iterations only."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from fixer.runtime.observer import Observer

KEPT_ITERATIONS = 2  # the latest iterations whose steps' sets are kept: a GAN's two players, stopped mid-iteration


class Gradients(Observer):
    def __init__(self, recorder: Any) -> None:
        super().__init__(recorder)
        self._serials: dict[int, tuple[Any, int]] = {}  # id(parameter) -> (the parameter, its number)
        self.ever: set[str] = set()  # parameters that got a gradient at some step
        self.by_iteration: dict[int, set[str]] = {}  # iteration -> parameters with a gradient at its steps
        self.nonfinite = False  # some step saw a NaN or infinite gradient

    @contextlib.contextmanager
    def numbering(self) -> Iterator[None]:
        """While active, every ``nn.Parameter`` created gets its number."""
        original = torch.nn.Parameter.__dict__["__new__"]
        create = original.__func__ if isinstance(original, staticmethod) else original

        def numbered(cls, data=None, requires_grad=True):
            parameter = create(cls, data, requires_grad)
            self._serials[id(parameter)] = (parameter, len(self._serials) + 1)
            return parameter

        torch.nn.Parameter.__new__ = staticmethod(numbered)
        try:
            yield
        finally:
            torch.nn.Parameter.__new__ = original

    def name(self, parameter: Any) -> str:
        entry = self._serials.get(id(parameter))
        number = entry[1] if entry is not None and entry[0] is parameter else "?"
        return f"parameter {number} {tuple(parameter.shape)}"

    def before_step(self, optimizer: Any, call: Any) -> None:
        if call is None:
            return
        graded = self.by_iteration.setdefault(call.iteration, set())
        for old in [i for i in self.by_iteration if i <= call.iteration - KEPT_ITERATIONS]:
            del self.by_iteration[old]
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                grad = parameter.grad
                if grad is None or grad.is_sparse:
                    continue
                if not self.nonfinite and not bool(torch.isfinite(grad).all()):
                    self.nonfinite = True
                name = self.name(parameter)
                if name not in graded and bool(grad.ne(0).any()):
                    graded.add(name)
                    self.ever.add(name)

    def latest(self) -> set[str]:
        """The parameters that got a gradient at a step of the last iterations."""
        return set().union(*self.by_iteration.values()) if self.by_iteration else set()
