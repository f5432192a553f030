"""Whether a guarded statement can run on several iterations of its loop.

A statement under ``if`` runs on the iterations whose guard holds. Some guards hold on many
iterations whatever the data: a data-dependent test of torch (``torch.isfinite(norm)``), an
ordering (``loss.item() < best``, ``step > warmup``), a period (``i % k == 0``). Others may hold
at most once per run of the loop (``i == len(loader) - 1``, ``step == total``), and a branch that
leaves the loop (``break``, ``return``) runs once. A guard that is only a flag or a call of the
project (``if apply_gradients:``, ``if ready():``) says nothing: unknown, never "many". A filter of
the loop or a shared guard (passes.py) selects the loop's training passes: it is no guard here."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.names import qualified
from fixer.analysis.passes import is_pass_filter
from fixer.context import FileContext
from fixer.nodes import walk

ONCE, MANY = "once", "many"
ORDERINGS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
LIBRARIES = ("torch.", "math.", "numpy.", "np.")


def runs_on_many_iterations(ctx: FileContext, node: ast.AST, loop: ast.AST) -> bool:
    """Whether ``node`` (inside ``loop``, maybe under guards) provably may run on more than one
    iteration of one run of the loop: every guard between it and the loop holds on many."""
    child = node
    for parent in ctx.ancestors(node):
        if parent is loop:
            return True
        if is_pass_filter(ctx, parent, child):
            pass  # a filter or shared guard selects the loop's training passes (passes.py)
        elif isinstance(parent, ast.If):
            branch = parent.body if _in(child, parent.body) else parent.orelse
            if any(isinstance(n, (ast.Break, ast.Return)) for s in branch for n in walk(s)):
                return False  # the branch leaves the loop: once
            if _frequency(ctx, parent.test) != MANY:
                return False
        elif isinstance(parent, (ast.stmt, ast.ExceptHandler, ast.BoolOp, ast.IfExp)) and not isinstance(parent, ast.Expr):
            return False  # a nested loop, a handler, a with or a conditional expression: not judged
        child = parent
    return False


def _in(node: ast.AST, body: list[ast.stmt]) -> bool:
    return any(node is stmt for stmt in body)


def _frequency(ctx: FileContext, test: ast.expr) -> Optional[str]:
    """MANY, ONCE, or None (unknown) for how often ``test`` may hold within one run of a loop."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _frequency(ctx, test.operand)
        return MANY if inner == MANY else None  # not-once may still be once; not-many is unknown
    if isinstance(test, ast.BoolOp):
        found = [_frequency(ctx, value) for value in test.values]
        return MANY if all(f == MANY for f in found) else ONCE if ONCE in found else None
    if isinstance(test, ast.Compare):
        if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for side in (test.left, *test.comparators) for n in walk(side)):
            return MANY  # a period: i % k == 0
        return MANY if all(isinstance(op, ORDERINGS) for op in test.ops) else ONCE
    call = test
    while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Call):
        call = call.func.value  # torch.isfinite(norm).all()
    if isinstance(call, ast.Call) and (qualified(ctx, call.func) or "").startswith(LIBRARIES):
        return MANY
    return None
