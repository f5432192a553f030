"""Graph leaks: a holder the program can see (a local, a global, an attribute, a list or dict
element) keeps autograd graphs of more and more training steps alive.

Cheap by sampling: on a schedule of backward calls (each of the first eight steps, then every
1.5x more; without an optimizer, backward calls count as steps after sixteen; and once more
at the program's end, from its globals), at most once per training iteration, the holders
visible from the training code's frames are searched for tensors with a graph; each graph is
walked (bounded) and its nodes' records say in which earlier iterations they were built. A
leak is something that grows with the steps: a holder reaching the graphs of more earlier
iterations at each of its last three samples, three or more at the last. One value spanning
several optimizers' steps (a multi-optimizer loop's ``loss_D = (loss_D_A + loss_D_B) / 2``
kept for a log line) reaches one or two iterations, however often it is sampled; a bounded
window (a ``deque`` with a ``maxlen``) is never a leak. The cause, in the rules' terms:

The cause, in the rules' terms:

- the loss being backpropagated reaches those old nodes too: the graph is carried into every
  new loss (GF101);
- the holder is an ``nn.Module``'s attribute filled in one of that module's own methods: a
  graph cached on the module (GF104);
- else a running total or collection of values kept with their graphs (GF301).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import deque
from typing import Any, Optional

import torch

from fixer.runtime import graphwalk
from fixer.runtime.freed import _fill
from fixer.runtime.holders import Holder, graph_holders, reachable
from fixer.runtime.observer import Observer
from fixer.runtime.recorder import KEY
from fixer.runtime.report import Finding, Piece
from fixer.runtime.sites import divergence, source_line
from fixer.runtime.unwalked import Unwalked, passes

EVERY_UNTIL = 8  # steps sampled one by one at first, then every 1.5x more
NO_OPTIMIZER_AFTER = 16  # backward calls without any optimizer step, after which they mark the schedule
GROWN = 3  # earlier iterations a holder must reach
GROWING = 3  # samples in a row, each reaching more iterations than the one before
BUDGET = 4000  # graph nodes walked per holder and sample
INDEXED = re.compile(r"\[\d+\].*")  # from a holder's first index on: ``saved[3][0]`` -> ``saved``


class Leaks(Observer):
    def __init__(self, recorder: Any) -> None:
        super().__init__(recorder)
        self._steps: list[int] = []  # positions of optimizer steps
        self._backwards: list[int] = []  # positions of backward calls
        self._next = 1  # a first look after one step, to see the growth to three in three samples
        self._sampled = -1  # the iteration of the last sample
        self._seen: dict[tuple, list[int]] = {}  # (name, its root's code) -> iterations reached at its last samples
        self._reported: set[tuple] = set()
        self._unwalked = Unwalked()  # holders of a graph no backward walks, held across steps (fixer.runtime.unwalked)

    def before_step(self, optimizer: Any, call: Any) -> None:
        self._steps.append(call.position)

    def before_backward(self, call: Any, tensors: tuple) -> None:
        if call.kind == "backward":
            self._backwards.append(call.position)
        marks = self._marks()
        if len(marks) >= self._next and call.iteration > self._sampled:  # (several optimizers: one look per iteration)
            self._next = len(marks) + 1 if len(marks) < EVERY_UNTIL else int(len(marks) * 1.5)
            self._sampled = call.iteration
            self._sample(call, tensors, call.iteration)

    def finish(self, whole_run: bool) -> list[Finding]:
        """A last look when the program ran to its end: its globals may hold the graphs of the
        last steps (a three-step loop that appends after each step shows the third only now)."""
        names, last = self.recorder.program_globals, next((c for c in reversed(self.recorder.calls) if c.kind == "backward"), None)
        marks = self._marks()
        if not whole_run or not names or last is None or len(marks) < 2:
            return []
        module = next((code for code, _ in reversed(last.stack) if code.co_name == "<module>"), None)
        roots = [(name, value, module) for name, value in names.items() if not name.startswith("__")]
        tensors = tuple(t for t in (ref() for ref in last.roots) if t is not None)
        found = len(self.findings)
        self._sample(last, tensors, last.iteration + 1, roots)  # (the last iteration's graphs are earlier ones now)
        new, self.findings[found:] = self.findings[found:], []
        return new

    def _marks(self) -> list[int]:
        """Optimizer steps; backward calls only once many ran without any step (no optimizer)."""
        if self._steps or len(self._backwards) < NO_OPTIMIZER_AFTER:
            return self._steps
        return self._backwards

    def _iterations(self, roots: list, current: int, clean: dict) -> tuple[set, Optional[Any]]:
        """The iterations before ``current`` whose nodes the graphs below ``roots`` reach, and the
        oldest record. ``clean`` (id -> node, held so ids stay unique) gathers, over one sample, the
        nodes shown to reach no earlier iteration (a walk that stayed within BUDGET and found none):
        a later walk skips them (the holders of one step share most of their graph). Where the
        skipping could have let a walk past BUDGET, it is walked again without: the answer is always
        a plain bounded walk's."""
        found, oldest, visited = self._walk(roots, current, clean)
        if clean and len(visited) + len(clean) > BUDGET:
            found, oldest, visited = self._walk(roots, current, {})
        if not found and len(visited) <= BUDGET:
            clean.update((id(node), node) for node in visited)
        return found, oldest

    def _walk(self, roots: list, current: int, skipped: dict) -> tuple[set, Optional[Any], list]:
        """graphwalk.walk's breadth-first order, inline (every node of every sampled graph passes
        here), at most BUDGET nodes; ``skipped`` nodes are neither counted nor walked below."""
        found: set[int] = set()
        oldest = None
        starts = self.recorder.iteration_starts
        # a node is of an earlier iteration when built before ``current`` began
        limit = float("inf") if current > len(starts) else starts[current - 1] if current > 0 else -1
        seen: set[int] = set()
        visited: list = []  # held, so ids stay unique during the walk
        queue = deque(node for node in roots if node is not None)
        pop, push = queue.popleft, queue.append
        while queue:
            node = pop()
            if id(node) in seen or id(node) in skipped:
                continue
            seen.add(id(node))
            visited.append(node)
            if len(visited) > BUDGET:
                break
            try:
                record = node.metadata.get(KEY)
            except (AttributeError, RuntimeError):
                record = None
            if record is not None and record.position < limit:
                found.add(bisect_right(starts, record.position))
                if oldest is None or record.position < oldest.position:
                    oldest = record
            for child, _ in node.next_functions:
                if child is not None:
                    push(child)
        return found, oldest, visited

    def _roots(self) -> set[int]:
        """The records of the graphs the recent backward calls walked from (ids)."""
        return {id(r) for c in self.recorder.calls for r in c.root_records}

    def _sample(self, call: Any, tensors: tuple, current: int, roots: Optional[list] = None) -> None:
        in_loop = roots is None  # (not the program's last look from its globals)
        groups: dict[tuple, tuple[Holder, list, Any]] = {}
        for holder, value, root in graph_holders(roots):
            if holder.bounded:  # a deque(maxlen=k): a window, however long it is
                continue
            name = INDEXED.sub("", holder.name)  # a list of steps: its entries and what they hold are one holder
            # (a step function's local ``loss`` and the loop's global ``loss`` are two holders;
            # a global is one holder however the module ran: as a script, through runpy, ...)
            scope = None if root is None or root.co_name == "<module>" else root
            entry = groups.setdefault((name, scope), (Holder(name, holder.on_module, holder.code), [], value))
            entry[1].append(value.grad_fn)
        for key in [k for k in self._seen if k not in groups]:  # holding no graph now (a total reset to 0.0): starts again
            del self._seen[key]
        self._unwalked.forget(groups)
        carried = None
        clean: dict[int, Any] = {}
        for key, (holder, roots, value) in groups.items():
            iterations, oldest = self._iterations(roots, current, clean)
            counts = self._seen.setdefault(key, [])
            counts.append(len(iterations))
            del counts[:-GROWING]
            growing = len(counts) == GROWING and all(a < b for a, b in zip(counts, counts[1:]))
            if in_loop and self._steps and self._unwalked.held_again(key, value) and key not in self._reported and len({id(r) for r in roots}) == 1:
                many = passes(value, self._roots(), self._steps[0])
                if many is not None:
                    self._reported.add(key)
                    self._report_unwalked(holder, value, many, call, tensors)
                    continue
            if not growing or counts[-1] < GROWN or key in self._reported:
                continue
            if carried is None:
                carried = self._iterations([t.grad_fn for t in tensors if t.grad_fn is not None], current, clean)[0]
            self._reported.add(key)
            loss = next((r for r in map(graphwalk.record, (t.grad_fn for t in tensors if t.grad_fn is not None)) if r), None)
            self._report(holder, value, oldest, counts[-2], counts[-1], len(carried) >= GROWN, call, loss)

    def _report(self, holder: Holder, value: Any, oldest: Any, before: int, now: int, carried: bool, call: Any, loss: Any) -> None:
        record = graphwalk.record(value.grad_fn) or oldest
        built = Piece.at("oldest graph built", oldest.stack, self.recorder.iteration_of(oldest.position) + 1) if oldest else None
        held = Piece.at("still held", call.stack, call.iteration + 1)
        growth = f"`{holder.name}` keeps the autograd graphs of {now} earlier iterations alive, more at each look ({before} one look before)"
        store = _fill(holder, record, len(record.stack) - 1) if record is not None else None
        if carried:
            code, message = "GF101", f"{growth}, and every new loss is built on them: detach it where it is carried into the next step"
        elif holder.on_module and store is not None and store[1] is not None and _own_method(holder, store[1]):
            code, message = "GF104", f"{growth}: the module caches a value with its graph; store it detached"
        else:
            code, message = "GF301", f"{growth}, and no backward walks them: keep `.item()` or a detached tensor"
            store = self._stored(holder, record, loss)
        where = store[0] if store else held
        if where is None:  # not the user's code: nothing to point at
            return
        if all((f.code, f.line) != (code, where.line) for f in self.findings):
            self.findings.append(Finding.at(code, message, where, "", [store[0] if store else None, built, held]))

    def _report_unwalked(self, holder: Holder, value: Any, many: int, call: Any, tensors: tuple) -> None:
        record = graphwalk.record(value.grad_fn)
        loss = next((r for r in map(graphwalk.record, (t.grad_fn for t in tensors if t.grad_fn is not None)) if r), None)
        store = self._stored(holder, record, loss)
        held = Piece.at("still held", call.stack, call.iteration + 1)
        if store is None or any((f.code, f.line) == ("GF301", store[0].line) for f in self.findings):
            return
        message = (
            f"`{holder.name}` keeps the autograd graphs of {many} forward passes alive across optimizer steps, and no "
            "backward walks them: keep `.item()`, or compute them under `torch.no_grad()`"
        )
        self.findings.append(Finding.at("GF301", message, store[0], "", [store[0], held]))

    def _stored(self, holder: Holder, record: Any, loss: Any) -> Optional[tuple[Piece, Any]]:
        """Where the value enters the holder: the store itself when the loss is built in the same
        function, else the call there that hands it to the function storing it (``meter.update(loss)``)."""
        if record is None:
            return None
        level = divergence(record.stack, loss.stack)[0] if loss is not None else 0
        if level == 0:
            return _fill(holder, record, len(record.stack) - 1)
        code, line = record.stack[level]
        return Piece(f"stored in {holder.name}", code.co_filename, line, None, source_line(code, line)), code


def _own_method(holder: Holder, code: Any) -> bool:
    """The holder's attribute belongs to an ``nn.Module`` and ``code`` is a method of its class."""
    owner_path = holder.name.rsplit(".", 1)[0]
    for found, obj in reachable():
        if found.name == owner_path and isinstance(obj, torch.nn.Module):
            return any(getattr(f, "__code__", None) is code for klass in type(obj).__mro__ for f in vars(klass).values())
    return False
