"""Penalties that do nothing (GF107): gradients taken by ``autograd.grad`` without
``create_graph=True`` are constants, so a term built from them and added to a loss changes the
loss's value and none of its gradients.

So is an input's ``.grad`` read after a ``backward()`` without ``create_graph=True``. The
results of such a call are followed through the torch calls that take them (while any is
alive, the recorder hands this detector every call): a result without a graph stays followed
(``g.norm()``, ``10 * penalty``); one added to or subtracted from a value that has a graph marks
that node (the term joins a loss there); ``detach()`` ends the flow, and any other use with a
graph (a model's input, as in FGSM) is a use of the value, not a penalty. A backward whose loss
reaches a marked node only through sums, means, negations and scalings by constants reports the
call that took the gradients. A backward or grad that fails because its loss has no graph at all and
is such a constant reports it too (a Hessian-vector product of first-order gradients).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any, Optional

import torch

from fixer.runtime.observer import Observer
from fixer.runtime.report import Finding, Piece
from fixer.runtime.sites import user_stack

JOINING = {"add", "__add__", "__radd__", "__iadd__", "add_", "sub", "__sub__", "__rsub__", "__isub__", "sub_", "rsub"}
ENDING = {"detach", "detach_", "__get__", "item", "tolist"}  # __get__: the ``.data`` attribute
LINEAR = {"AddBackward0", "AddBackward1", "SubBackward0", "SubBackward1", "RsubBackward1", "NegBackward0",
          "SumBackward0", "SumBackward1", "MeanBackward0", "MeanBackward1"}  # fmt: skip
SCALING = {"MulBackward0", "MulBackward1", "DivBackward0", "DivBackward1"}  # linear when one side is a constant
KEY = "graphfix.penalty"
CALLERS = 3  # calls above the gradient's `grad` kept as evidence
NO_GRAPH = "does not require grad and does not have a grad_fn"


class Penalty(Observer):
    def __init__(self, recorder: Any) -> None:
        super().__init__(recorder)
        self._constants: dict[int, tuple] = {}  # id(tensor) -> (weakref, the grad Call)
        self._joined: list = []  # (weakref to the node's record, grad Call, Stack of the joining op)
        self._reported: set = set()
        self._backward: Optional[Any] = None  # the latest Tensor.backward without create_graph

    def after_backward(self, call: Any, tensors: tuple, result: Any, retain: bool, create: bool) -> None:
        self._constants = {key: entry for key, entry in self._constants.items() if entry[0]() is not None}
        if not self._constants and self in self.recorder.op_watchers:
            self.recorder.op_watchers.remove(self)  # nothing to follow: torch calls go unwatched again
        if call.kind == "backward":
            self._backward = None if create else call
        if call.kind != "grad" or create or not isinstance(result, (tuple, list)):
            return
        for tensor in result:
            if isinstance(tensor, torch.Tensor) and tensor.grad_fn is None:
                self._constants[id(tensor)] = (weakref.ref(tensor), call)
        if self._constants and self not in self.recorder.op_watchers:
            self.recorder.op_watchers.append(self)

    def grad_read(self, owner: Any, grad: Any) -> None:
        """An input's ``.grad`` read in grad mode after a backward without create_graph: a
        constant, followed as ``autograd.grad``'s results are (a parameter's gradient is the
        optimizer's business, and a read under no_grad cannot be meant to join a loss)."""
        call = self._backward
        if call is None or isinstance(owner, torch.nn.Parameter) or not torch.is_grad_enabled() or id(grad) in self._constants:
            return
        self._constants[id(grad)] = (weakref.ref(grad), call)
        if self not in self.recorder.op_watchers:
            self.recorder.op_watchers.append(self)

    def _origin(self, value: Any) -> Optional[Any]:
        entry = self._constants.get(id(value))
        if entry is None:
            return None
        if entry[0]() is not value:
            del self._constants[id(value)]
            return None
        return entry[1]

    def op(self, func: Any, args: tuple, kwargs: Any, out: Any) -> None:
        origin = None
        for arg in args:
            items = arg if isinstance(arg, (tuple, list)) else (arg,)
            for item in items:
                if isinstance(item, torch.Tensor) and (origin := self._origin(item)) is not None:
                    break
            if origin is not None:
                break
        if origin is None:
            if not self._constants:
                self.recorder.op_watchers.remove(self)
            return
        name = getattr(func, "__name__", "")
        if name in ENDING:
            return
        outs = out if isinstance(out, (tuple, list)) else (out,)
        for item in outs:
            if not isinstance(item, torch.Tensor):
                continue
            if item.grad_fn is None:
                self._constants[id(item)] = (weakref.ref(item), origin)
            elif name in JOINING:
                record = item.grad_fn.metadata.get("graphfix")
                if record is not None:
                    item.grad_fn.metadata[KEY] = origin
                    self._joined.append((weakref.ref(record), origin, user_stack(sys._getframe())))

    def before_backward(self, call: Any, tensors: tuple) -> None:
        self._joined = [j for j in self._joined if j[0]() is not None]
        if not self._joined:
            return
        for root in (t.grad_fn for t in tensors if t.grad_fn is not None):
            node = _through_linear(root)
            if node is not None:
                record = node.metadata.get("graphfix")
                joined = next((j for j in self._joined if j[0]() is record), None)
                if joined is not None:
                    self._report(joined[1], joined[2], call)

    def on_error(self, error: str, call: Any) -> Optional[Finding]:
        if NO_GRAPH not in error:
            return None
        origin = next((o for o in (self._origin(r()) for r in call.roots if r() is not None) if o is not None), None)
        if origin is None:
            return None
        grad = Piece.at("gradient taken", origin.stack, origin.iteration + 1)
        failed = Piece.at("differentiated", call.stack, call.iteration + 1)
        if grad is None or failed is None:
            return None
        message = (
            f"the gradients taken here without create_graph=True are constants, so the {call.kind} at line "
            f"{failed.line} has no graph to walk: pass create_graph=True"
        )
        return Finding.at("GF107", message, grad, error, [grad, *_callers(origin), failed])

    def _report(self, origin: Any, joined: Any, call: Any) -> None:
        if origin.stack in self._reported:
            return
        self._reported.add(origin.stack)
        grad = Piece.at("gradient taken", origin.stack, origin.iteration + 1)
        added = Piece.at("added to the loss", joined, call.iteration + 1)
        back = Piece.at("backpropagated", call.stack, call.iteration + 1)
        if grad is None or added is None or back is None:
            return
        message = (
            f"the gradients taken here without create_graph=True are constants: the term built from them (line "
            f"{added.line}) changes no gradient of the backward at line {back.line}: pass create_graph=True"
        )
        self.findings.append(Finding.at("GF107", message, grad, "", [grad, *_callers(origin), added, back]))


def _callers(origin: Any) -> list[Piece]:
    """The calls that led to the gradient's ``grad`` call, innermost first (CALLERS of them): a
    helper that passes its own parameter on as ``create_graph`` leaves the flag to them."""
    found = (Piece.at("called from", origin.stack, origin.iteration + 1, level) for level in range(1, min(CALLERS + 1, len(origin.stack))))
    return [p for p in found if p is not None]


def _through_linear(root: Any) -> Optional[Any]:
    """The first node marked as a constant's joining point reached from ``root`` through linear
    nodes only (breadth-first), else None."""
    queue, seen = [root], set()
    while queue:
        node = queue.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if KEY in node.metadata:
            return node
        kind = type(node).__name__
        children = [c for c, _ in node.next_functions if c is not None]
        if kind in LINEAR or (kind in SCALING and len(children) == 1):
            queue.extend(children)
    return None
