"""Which gradient each optimizer used, and through which value it flowed: the facts that let
``graphfix run --fix`` refuse a cut (``.detach()``, ``torch.no_grad()``, ``.item()``) that takes
away a gradient the program trains with, however many other gradients the same parameters keep.

- **used**: for each backward line, the parameters that an optimizer stepped after a backward at
  that line and before their gradient was reset (``zero_grad()`` of their optimizer or module,
  or a ``.grad`` found None). A GAN's discriminator step that reaches the generator through the
  fake does not count for the generator when ``netG.zero_grad()`` runs before its step.
- **through**: in a probe run (the original program with the cut value wrapped in ``mark``: a
  fresh view, nothing else changes), for each backward line that walked through the marked
  value, the parameters its graph reaches below the mark, through nodes of the backward's own
  iteration (a value carried from an earlier iteration, whose graph that iteration's backward
  freed, reaches nothing: the very path a truncation cuts);
- **beside**: in a probe run, for each backward line that walked through the marked value, the
  parameters its graph reaches other than through it (fresh graphs of its own iteration).

A cut is refused when some backward line walked through it to a parameter in that line's
``used`` (fixer.runtime.repair.trial)."""

from __future__ import annotations

from typing import Any

CUT = "graphfix-cut"  # the key of a marked view's node in its ``metadata``
EVENTS = 4096  # backward calls remembered; older ones count as one before every reset


def mark(value: Any, ident: str = "cut") -> Any:
    """``value`` as it is, a tensor with a graph as a fresh view whose node carries ``ident``
    (lists, tuples and dicts item by item)."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.grad_fn is None:
            return value
        view = value.view_as(value)
        view.grad_fn.metadata[CUT] = ident
        return view
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return type(value)(mark(v, ident) for v in value)
    if isinstance(value, dict) and type(value) is dict:
        return {k: mark(v, ident) for k, v in value.items()}
    return value


def site_of(call: Any) -> str:
    """The backward call's line: ``/abs/train.py:91``."""
    code, line = call.stack[0] if call.stack else (None, 0)
    return f"{code.co_filename if code is not None else '?'}:{line}"


class Flows:
    def __init__(self) -> None:
        self._events: list[str] = []  # backward lines, in order
        self._dropped = 0  # events no longer in the list
        self._reset: dict[int, int] = {}  # id(parameter) -> the event count at its last reset
        self.used: dict[str, set[str]] = {}
        self.through: dict[str, set[str]] = {}
        self.beside: dict[str, set[str]] = {}

    def backward(self, site: str, unset: list[Any]) -> None:
        """A backward at ``site`` is about to run; ``unset``: the parameters it reaches whose
        ``.grad`` is None (their gradient starts here)."""
        count = self._dropped + len(self._events)
        for parameter in unset:
            self._reset[id(parameter)] = count
        self._events.append(site)
        if len(self._events) > EVENTS:
            half = EVENTS // 2
            self._dropped += half
            del self._events[:half]

    def reset(self, parameters: Any) -> None:
        count = self._dropped + len(self._events)
        for parameter in parameters:
            self._reset[id(parameter)] = count

    def step(self, graded: list[tuple[Any, str]]) -> None:
        """An optimizer steps ``graded`` (parameter, name) with a nonzero gradient."""
        lines: dict[int, set[str]] = {}
        for parameter, name in graded:
            since = max(self._reset.get(id(parameter), 0) - self._dropped, 0)
            sites = lines.get(since)
            if sites is None:
                sites = lines[since] = set(self._events[since:])
            for site in sites:
                self.used.setdefault(site, set()).add(name)

    def walked(self, site: str, reached: set[str]) -> None:
        self.through.setdefault(site, set()).update(reached)

    def walked_beside(self, site: str, reached: set[str]) -> None:
        self.beside.setdefault(site, set()).update(reached)


def as_map(pairs: Any) -> dict[str, set[str]]:
    """``{site: names}`` from a dict or a JSON list of ``[site, [names]]``."""
    items = pairs.items() if isinstance(pairs, dict) else pairs or ()
    return {site: set(names) for site, names in items}
