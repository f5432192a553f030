"""Facts about a second backward of the same value (GF106's query): whether the first backward's
graph certainly saved tensors (so walking it again raises), whether an optimizer step runs
between the two, and whether the name the later backward reads still holds what a helper
returned at the first."""

from __future__ import annotations

import ast

from fixer.analysis.calls import BackwardCall, optimizer_calls
from fixer.analysis.graph import facts
from fixer.analysis.names import dotted
from fixer.analysis.scopes import Scope
from fixer.analysis.shared_graph import graph_origins
from fixer.context import FileContext


def saves_surely(ctx: FileContext, scope, call: BackwardCall) -> bool:
    """The target's graph certainly saved tensors (a module, criterion or multiplying operation)."""
    return any(origin.saves for origin in graph_origins(ctx, scope, call.target, call.node))


def step_between(ctx: FileContext, scope: Scope, first: ast.stmt, second: ast.stmt) -> bool:
    """An optimizer step runs between the two statements (same pass, source order)."""
    start, end = (first.end_lineno, first.end_col_offset), (second.lineno, second.col_offset)
    return any(
        o.kind == "step" and start <= (o.node.lineno, o.node.col_offset) < end for o in optimizer_calls(ctx, scope)
    )


def unchanged_between(ctx: FileContext, scope: Scope, call: BackwardCall, later: BackwardCall) -> bool:
    """The name ``later`` backpropagates still holds what the helper returned at ``call``: its
    reaching definition at ``later`` is that call's assignment alone."""
    defs = facts(ctx, scope).reaching(dotted(later.target), later.node)
    return len(defs) == 1 and defs[0][0] is ctx.parent(call.node)
