"""A second backward of the same value (GF106's query, ``repeated_backwards``): per backward
whose graph certainly saved tensors (so walking it again raises), the first later call of the
same pass that walks it again: after a helper that backpropagated and returned it, through a
helper that backpropagates it, after an optimizer step, plainly, or after the loop that ran it;
and the facts behind them (whether a step runs between the two, whether the name the later
backward reads still holds what a helper returned at the first)."""

from __future__ import annotations

import ast
from typing import Iterator, NamedTuple, Optional

from fixer.analysis.calls import BackwardCall, backward_calls, optimizer_calls, retains_graph
from fixer.analysis.graph import facts
from fixer.analysis.helper_backwards import helper_backwards, returning_helpers
from fixer.analysis.names import dotted
from fixer.analysis.scopes import Scope
from fixer.analysis.shared_graph import (
    backwarded_again_after_loop,
    graph_origins,
    runs_after_in_same_pass,
    same_pass_later,
    same_value,
)
from fixer.context import FileContext

# how the later backward meets the freed graph
AFTER_RETURNING_HELPER, THROUGH_HELPER, AFTER_STEP, AGAIN, AFTER_LOOP = "returned", "helper", "step", "again", "loop"


class Repeat(NamedTuple):
    kind: str
    call: BackwardCall  # the backward (or the helper call) that frees the graph
    later: BackwardCall  # the backward that walks it again
    inner: Optional[BackwardCall] = None  # the helper's own backward call
    here: bool = True  # the helper is in this file


def repeated_backwards(ctx: FileContext, scope: Scope) -> Iterator[Repeat]:
    direct = [c for c in backward_calls(ctx, scope) if c.keyword("create_graph") is None]
    helpers = helper_backwards(ctx, scope) if direct else {}
    returning = returning_helpers(ctx, scope) if direct else {}
    calls = sorted(direct + list(helpers) + list(returning), key=lambda c: (c.node.lineno, c.node.col_offset))
    following = same_pass_later(ctx, scope, [ctx.statement_of(c.node) for c in calls], allow_first_loop=True)  # the only later calls to ask
    for index, call in enumerate(calls):
        if not following[index] or retains_graph(call):
            continue  # (before the graph's origins are asked: no later backward to repeat it)
        if not (saves_surely(*returning[call]) if call in returning else saves_surely(ctx, scope, call)):
            continue
        stmt = ctx.statement_of(call.node)
        for later in (calls[i] for i in following[index]):
            later_stmt = ctx.statement_of(later.node)
            if call in returning and later not in helpers and later not in returning and runs_after_in_same_pass(ctx, scope, stmt, later_stmt):
                if dotted(later.target) == dotted(call.target) and unchanged_between(ctx, scope, call, later):
                    yield Repeat(AFTER_RETURNING_HELPER, call, later, returning[call][2])
                    break
            if runs_after_in_same_pass(ctx, scope, stmt, later_stmt) and same_value(ctx, scope, call, later):
                if call in helpers:
                    inner, here = helpers[call]
                    yield Repeat(THROUGH_HELPER, call, later, inner, here)
                elif later not in helpers and step_between(ctx, scope, stmt, later_stmt):
                    yield Repeat(AFTER_STEP, call, later)
                elif later not in helpers:
                    yield Repeat(AGAIN, call, later)
                break
            if backwarded_again_after_loop(ctx, scope, call, later):
                yield Repeat(AFTER_LOOP, call, later)
                break


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
