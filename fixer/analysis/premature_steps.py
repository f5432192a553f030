"""An optimizer step taken between two backward passes of one graph, while the same optimizer
steps again after the second:

    loss1.backward(retain_graph=True)
    optimizer.step()      # changes the weights the graph saved: loss2.backward() raises
    loss2.backward()
    optimizer.step()

No ``zero_grad`` runs between the two steps, so the later one already applies the gradients of
both backward calls: the program means one update from both losses (a minimax or multi-term
objective), and the early step is premature. Deleting it is the repair: both backward calls walk
the graph at the weights it saved, and the later step applies their sum.

``premature_step(ctx, step, backward, earlier)`` is that later step statement, when the block
proves it: one of the ``earlier`` backward statements, the step and the second backward are
statements of one block in this order, nothing but call-free statements sits between the step and the second backward (no
forward pass that would now see the old weights), and after the second backward the block reaches
``X.step()`` on the same optimizer, as a statement of its own, before any ``zero_grad``, any
rebinding of the optimizer's name, or any statement that may leave the block or steps it under a
condition. Otherwise None: the two steps are meant as two updates, and only recomputing the
forward pass after the first is right.
"""

from __future__ import annotations

import ast
from typing import Iterable, Optional

from fixer.analysis.names import dotted
from fixer.analysis.passes import guarded_statement, guarded_unit, same_guard
from fixer.analysis.scopes import enclosing_block
from fixer.context import FileContext
from fixer.nodes import walk

LEAVING = (ast.Return, ast.Break, ast.Continue, ast.Raise)


def premature_step(ctx: FileContext, step: ast.stmt, backward: ast.stmt, earlier: Iterable[ast.stmt]) -> Optional[ast.stmt]:
    """(Each statement may sit under a shared guard holding only it: ``passes.guarded_unit``; the
    four then run on the same passes.)"""
    unit, back = guarded_unit(ctx, step), guarded_unit(ctx, backward)
    owner = stepped_optimizer(guarded_statement(ctx, unit))
    body = enclosing_block(ctx, unit)
    if owner is None or body is None or not same_guard(ctx, unit, back):
        return None
    at = {id(s): i for i, s in enumerate(body)}
    j, k = at[id(unit)], at.get(id(back))
    firsts = [guarded_unit(ctx, s) for s in earlier]
    if k is None or j > k or not any(at.get(id(s), j) < j and same_guard(ctx, s, unit) for s in firsts):
        return None
    if any(isinstance(n, ast.Call) for s in body[j + 1 : k] for n in walk(s)):
        return None  # a forward pass between would now run at the old weights
    root = owner.partition(".")[0]
    for later in body[k + 1 :]:
        if stepped_optimizer(guarded_statement(ctx, later)) == owner:
            return later if same_guard(ctx, later, unit) else None
        for node in walk(later):
            if isinstance(node, LEAVING) or isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr == "zero_grad" or node.func.attr == "step" and dotted(node.func.value) == owner
            ):
                return None  # cleared, stepped only on some paths, or the block may be left before the step
            if isinstance(node, ast.Name) and node.id == root and not isinstance(node.ctx, ast.Load):
                return None
    return None


def stepped_optimizer(stmt: ast.stmt) -> Optional[str]:
    """``X`` of a statement ``X.step()`` (no closure, no arguments)."""
    if isinstance(stmt, ast.Expr) and isinstance(call := stmt.value, ast.Call) and isinstance(call.func, ast.Attribute):
        if call.func.attr == "step" and not call.args and not call.keywords:
            return dotted(call.func.value)
    return None

