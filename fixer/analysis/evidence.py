"""Facts a run proved, handed to the static rules (``graphfix run --diff/--fix``).

Static analysis says "don't know" for a call it cannot see into. When ``graphfix run`` watched the
program build an autograd graph in a call at a known line (the value that crossed into a freed
graph), that call's result carries a graph: a rule can then prove, and fix, what it could not
from the text alone. Outside ``graphfix run`` there is no evidence and nothing changes."""

from __future__ import annotations

import ast
import contextlib
import os
from contextvars import ContextVar
from typing import Iterable, Iterator, Mapping

from fixer.context import FileContext

_GRAPH_LINES: ContextVar[Mapping[str, frozenset[int]]] = ContextVar("graph_lines", default={})


@contextlib.contextmanager
def runtime_evidence(graph_lines: Mapping[str, Iterable[int]]) -> Iterator[None]:
    """While active, calls on these lines of these files (absolute paths) return a graph."""
    token = _GRAPH_LINES.set({os.path.abspath(path): frozenset(lines) for path, lines in graph_lines.items()})
    try:
        yield
    finally:
        _GRAPH_LINES.reset(token)


def built_graph(ctx: FileContext, node: ast.AST) -> bool:
    """The run saw the code at ``node`` (a call, a statement) build a graph that a backward pass
    needed: it saves tensors and reaches tensors that require grad. False outside ``graphfix run``."""
    evidence = _GRAPH_LINES.get()
    if not evidence:
        return False
    lines = evidence.get(os.path.abspath(ctx.path), frozenset())
    return any(node.lineno <= line <= (node.end_lineno or node.lineno) for line in lines)
