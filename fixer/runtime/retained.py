"""Needless ``retain_graph=True`` (GF302), proven: a graph kept by a backward that no later
backward or ``autograd.grad`` walks before it dies.

After a call with ``retain_graph=True`` written out (``create_graph`` not set: its graph is
meant to be differentiated again), every node of the graph it walked but the leaves' gets a
pre-hook, which fires only if a later backward executes that node, and a token in its
``metadata``, which dies with the node. A call site is reported when none of its calls' graphs
was walked again, and the whole program ended or, at an early stop (``--max-steps``), some of
them already died unwalked (the graph still alive at the stop is not waited for); a graph too
large to watch, or holding nodes a ``create_graph=True`` call built (a gradient penalty's,
MAML's), leaves its site undecided, so unreported, as does a stop before any graph died.

A kept graph walked again after an optimizer stepped the parameters below the node first
reached, whose line ran only once, is a value built before the loop that every step reuses with
its old parameters, which retain_graph=True keeps from failing (GF102).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from fixer.runtime import graphwalk
from fixer.runtime.freed import stored_at
from fixer.runtime.observer import Observer
from fixer.runtime.report import Finding, Piece, nth
from fixer.runtime.sites import divergence, source_line

KEY = "graphfix.retained"
MAX_NODES = 20000  # a larger graph is not watched (its site stays undecided)


@dataclass(eq=False)
class _Kept:
    call: Any
    alive: int = 0
    walked: bool = False
    undecided: bool = False
    handles: list = field(default_factory=list)

    def walk_seen(self, *_: Any) -> None:
        if not self.walked:
            self.walked = True
            for handle in self.handles:
                handle.remove()
            self.handles = []


class _Token:
    __slots__ = ("kept",)

    def __init__(self, kept: _Kept) -> None:
        self.kept = kept
        kept.alive += 1

    def __del__(self) -> None:
        self.kept.alive -= 1


class Retained(Observer):
    def __init__(self, recorder: Any) -> None:
        super().__init__(recorder)
        self._kept: list[_Kept] = []
        self._created: list[tuple[int, int]] = []  # positions of the nodes create_graph=True calls built
        self._running: Any = None  # the backward call under way
        self._stale_sites: set = set()

    def after_backward(self, call: Any, tensors: tuple, result: Any, retain: bool, create: bool) -> None:
        if create:
            self._created.append((call.position, self.recorder.position))
        if not retain or create:
            return
        kept = _Kept(call)
        self._kept.append(kept)
        nodes = []
        for node, _ in graphwalk.walk(t.grad_fn for t in tensors):
            record = graphwalk.record(node)
            if len(nodes) >= MAX_NODES or (record is not None and self._differentiated(record.position)):
                kept.undecided = True  # too large, or holding a gradient's graph (left to GF107's rule)
                return
            if not hasattr(node, "variable"):  # a leaf's AccumulateGrad is walked by every backward
                nodes.append(node)
        for node in nodes:
            node.metadata.setdefault(KEY, []).append(_Token(kept))
            params = frozenset(map(id, graphwalk.parameters_below(node)))  # ids only: a hook holding its node would never let the graph die
            hook = partial(self._walked_again, kept, graphwalk.record(node), params) if params else kept.walk_seen
            kept.handles.append(node.register_prehook(hook))

    def before_backward(self, call: Any, tensors: tuple) -> None:
        self._running = call

    def _walked_again(self, kept: _Kept, record: Any, params: frozenset, *_: Any) -> None:
        """A later backward walks the kept graph (first node reached): stale when an optimizer
        stepped the parameters below this node since the graph was built, and its line ran only
        once: a value built before the loop, reused by every step with old parameters (GF102)."""
        kept.walk_seen()
        try:
            self._stale(kept, record, params)
        except Exception as bug:  # inside the engine's backward: never raise into it
            self.recorder.failures.append(f"Retained: {type(bug).__name__}: {bug}")

    def _stale(self, kept: _Kept, record: Any, params: frozenset) -> None:
        recorder, running = self.recorder, self._running
        if record is None or running is None or recorder.iteration_of(record.position) >= running.iteration:
            return  # built in this iteration: a graph shared by this iteration's losses
        if recorder.last_seen.get(id(record.stack), -1) > record.position:
            return  # its line ran again since: carried from an earlier iteration, not built once
        steps = [c for p in params if (entry := recorder.stepped.get(p)) for c in entry[1] if c.position > record.position]
        if not steps or record.stack in self._stale_sites:
            return
        self._stale_sites.add(record.stack)
        step = min(steps, key=lambda c: c.position)
        it = lambda position: recorder.iteration_of(position) + 1  # noqa: E731
        level = divergence(record.stack, running.stack)[0]
        built = Piece.at("built", record.stack, it(record.position), level)
        stepped = Piece.at("parameters stepped", step.stack, step.iteration + 1)
        retained = Piece.at("graph kept by", kept.call.stack, kept.call.iteration + 1)
        again = Piece.at("backpropagated again", running.stack, running.iteration + 1)
        if None in (built, stepped, retained, again):
            return
        holder, stored = stored_at(record, level)
        message = (
            f"{f'`{holder.name}`' if holder else 'this value'} is built once, before the loop, and its graph (kept by "
            f"retain_graph=True at line {retained.line}) is backpropagated again in the {nth(again.iteration)} iteration after the step "
            f"at line {stepped.line} changed the parameters it was built from: its gradients are those of the old parameters: "
            "recompute it inside the loop"
        )
        # kept on an object (``self.cache`` set in ``__init__``): the line that fills it, which the fix moves
        where = stored if stored is not None and "." in holder.name else built
        pieces = [built, stored, retained, stepped, again] if stored is not None else [built, retained, stepped, again]
        self.findings.append(Finding.at("GF102", message, where, "", pieces))

    def _differentiated(self, position: int) -> bool:
        index = bisect.bisect_right(self._created, (position, float("inf"))) - 1
        return index >= 0 and position < self._created[index][1]

    def finish(self, whole_run: bool) -> list[Finding]:
        for kept in self._kept:
            for handle in kept.handles:
                handle.remove()
        sites: dict = {}
        for kept in self._kept:
            sites.setdefault(_written(kept.call.stack), []).append(kept)  # the line to edit, whoever calls it
        found = []
        for stack, kept in sites.items():
            # an early stop (--max-steps) leaves the last graphs alive: the ones that died unwalked decide
            decided = not any(k.undecided for k in kept) and (whole_run or any(k.alive == 0 for k in kept))
            if not stack or not decided or any(k.walked for k in kept):
                continue
            first, last = kept[0].call, kept[-1].call
            where = Piece.at("retained by", stack, first.iteration + 1)
            pieces = [where] + ([Piece.at("retained again", stack, last.iteration + 1)] if last is not first else [])
            message = (
                f"retain_graph=True keeps {'this graph' if len(kept) == 1 else f'each of the {len(kept)} graphs'} alive, "
                "and no later backward walks any of it before it is released: drop retain_graph=True"
            )
            found.append(Finding.at("GF302", message, where, "", pieces))
        return found


def _written(stack: tuple) -> tuple:
    """The frame whose line writes ``retain_graph`` (a helper's caller passing it on), else the
    innermost: the line a fix edits, as a one-frame stack."""
    for code, line in stack:
        if "retain_graph" in source_line(code, line):
            return ((code, line),)
    return stack[:1]
