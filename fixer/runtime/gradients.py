"""Which parameters a run trained: at every optimizer step, the parameters whose gradient is
not None and not all zero, named by the order in which the program created them (``parameter
3 (8, 4)``: the third ``nn.Parameter`` built, its shape). A fix that changes how losses are
built but not how modules are made keeps those names, so ``graphfix run --fix`` can compare the
first run with a re-run: a detach that cuts a generator or an encoder off the loss shows as
parameters that got a gradient before and get none now (fixer.runtime.repair.trial).

Only the parameters a loss reaches *directly* count: through nodes built in its own iteration
(or before the loop), not through a value carried from an earlier iteration. A gradient that
arrives only through a carried state is the very path a truncation (``state.detach()``) cuts.

The names count from the run's start. "Lately" is per optimizer: the parameters graded at its
last steps (a GAN's discriminator and generator each keep theirs, however the steps alternate)."""

from __future__ import annotations

import contextlib
import gc
from typing import Any, Iterator, Optional

import torch

from fixer.runtime.flows import CUT, Flows, site_of
from fixer.runtime.observer import Observer
from fixer.runtime.recorder import KEY

KEPT_STEPS = 2  # each optimizer's latest steps whose sets are kept (a step that skips a branch now and then)
OPTIMIZERS = 64  # optimizers whose latest steps are kept, at most (a program may make one per epoch)
WALKED = 20000  # graph nodes walked per backward, at most


class Gradients(Observer):
    def __init__(self, recorder: Any) -> None:
        super().__init__(recorder)
        self._serials: dict[int, tuple[Any, int]] = {}  # id(parameter) -> (the parameter, its number)
        self.ever: set[str] = set()  # parameters that got a gradient at some step
        self.recent: dict[int, list[set[str]]] = {}  # id(optimizer) -> parameters graded at its latest steps
        self.nonfinite = False  # some step saw a NaN or infinite gradient
        self.direct: set[str] = set()  # parameters some loss reached through its own iteration's nodes
        self._held: Optional[set[int]] = None  # ids of the parameters the modules held at the first backward
        self.flows = Flows()  # which backward's gradient each step used, and through which cut value (fixer.runtime.flows)

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

    def before_backward(self, call: Any, tensors: tuple) -> None:
        if call.kind != "backward":
            return
        if self._held is None:  # (once: the program's modules are built by its first backward)
            self._held = {id(p) for m in gc.get_objects() if issubclass(type(m), torch.nn.Module) for p in m.parameters(recurse=False)}
        starts = self.recorder.iteration_starts
        start = starts[call.iteration - 1] if call.iteration else 0  # (positions of nodes built before this iteration)
        reached, marks, unset = self._walk([t.grad_fn for t in tensors if t.grad_fn is not None], start, beside=True)
        site = site_of(call)
        if marks:  # (a probe run: what its graph reaches beside the cut value, and through it)
            self.flows.walked_beside(site, reached)
        for node in marks:
            through, _, more = self._walk([node], start)
            self.flows.walked(site, through)
            reached, unset = reached | through, unset + more
        self.direct |= reached
        self.flows.backward(site, unset)

    def _walk(self, stack: list, start: int, beside: bool = False) -> tuple[set[str], list, list]:
        """(the parameters reached through nodes built since ``start``, the marked nodes met,
        the parameters reached whose ``.grad`` is None); ``beside``: not below a marked node."""
        seen, reached, marks, unset = set(), set(), [], []
        while stack and len(seen) < WALKED:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            variable = getattr(node, "variable", None) if type(node).__name__ == "AccumulateGrad" else None
            if variable is not None:
                reached.add(self.name(variable))
                if variable.grad is None:
                    unset.append(variable)
                continue
            meta = node.metadata
            record = meta.get(KEY)
            if record is not None and record.position < start:
                continue  # carried from an earlier iteration
            if CUT in meta:
                marks.append(node)
                if beside:
                    continue
            stack.extend(child for child, _ in node.next_functions if child is not None)
        return reached, marks, unset

    def zero_grad(self, owner: Any, call: Any) -> None:
        if isinstance(owner, torch.optim.Optimizer):
            self.flows.reset(p for group in owner.param_groups for p in group["params"])
        elif isinstance(owner, torch.nn.Module):
            self.flows.reset(owner.parameters())

    def before_step(self, optimizer: Any, call: Any) -> None:
        steps = self.recent.pop(id(optimizer), [])  # (popped and put back: the latest optimizer last)
        graded: set[str] = set()
        stepped: list = []
        self.recent[id(optimizer)] = (steps + [graded])[-KEPT_STEPS:]
        while len(self.recent) > OPTIMIZERS:
            del self.recent[next(iter(self.recent))]
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                grad = parameter.grad
                if grad is None or grad.is_sparse:
                    continue
                if not self.nonfinite and not bool(torch.isfinite(grad).all()):
                    self.nonfinite = True
                if bool(grad.ne(0).any()):
                    name = self.name(parameter)
                    graded.add(name)
                    self.ever.add(name)
                    stepped.append((parameter, name))
        self.flows.step(stepped)

    def orphans(self) -> set[str]:
        """The parameters reached directly that no ``nn.Module`` holds (``torch.exp(nn.Parameter(...))``):
        no optimizer of ``model.parameters()`` steps them, but a detach still cuts them off."""
        held = self._held or set()
        return {self.name(p) for p, _ in self._serials.values() if id(p) not in held} & self.direct

    def latest(self) -> set[str]:
        """The parameters that got a gradient at the latest steps of each optimizer."""
        return set().union(*(s for steps in self.recent.values() for s in steps))
