"""A graph that no backward walks, of several forward passes, held across optimizer steps: the
validation epoch run with autograd on whose summed loss (``total += loss``) the training loop
keeps until the next validation. It does not grow with the steps (one validation's graphs,
replaced at the next), so the leak's growth test never sees it; what tells it from a loss kept
for a log line is that none of its nodes was ever freed by a backward, none is a backward's
root, all were built once training had begun, and that it uses one parameter several times
(a pass per batch).

The leak sampler (fixer.runtime.leaks) asks, at each of its samples, for every holder whose
value is the very graph it held at the sample before (optimizer steps ran between); not at the
program's end (the last loss is still held there, and a retained graph is never freed)."""

from __future__ import annotations

import weakref
from collections import Counter
from typing import Any, Optional

from fixer.runtime import graphwalk

PASSES = 2  # forward passes (uses of one parameter) a held graph must hold
BUDGET = 4000  # nodes walked per graph


class Unwalked:
    def __init__(self) -> None:
        self._last: dict[tuple, weakref.ref] = {}  # holder's key -> the record of the root it held at the last sample

    def held_again(self, key: tuple, value: Any) -> bool:
        """``value``'s graph is the one ``key`` held at the sample before."""
        record = graphwalk.record(value.grad_fn)
        before = self._last.get(key)
        if record is None:
            return False
        self._last[key] = weakref.ref(record)
        return before is not None and before() is record

    def forget(self, keys: Any) -> None:
        for key in [k for k in self._last if k not in keys]:
            del self._last[key]


def passes(value: Any, roots: set, since: int) -> Optional[int]:
    """How many forward passes ``value``'s graph holds (the most uses of one parameter: each pass
    of a model uses each of its weights once), when every node was built after position ``since``
    (the first optimizer step: a value built before training, a regularizer that each step's
    backward walks again, is another matter), no backward freed any of them, none is a
    backward's root (``roots``: their records) and that is at least PASSES; else None."""
    uses: Counter = Counter()
    for number, (node, _) in enumerate(graphwalk.walk([value.grad_fn])):
        if number > BUDGET or graphwalk.is_freed(node):
            return None
        record = graphwalk.record(node)
        if record is not None and (id(record) in roots or record.position < since):
            return None
        for child, _ in node.next_functions:
            if child is not None and hasattr(child, "variable"):
                uses[id(child)] += 1
    most = max(uses.values(), default=0)
    return most if most >= PASSES else None
