"""Repairs of two backward passes through one graph (GF105, GF106):

- **use the value rebuilt since**: the loss backpropagated again is built from a value (``logits``)
  whose graph the first backward freed, while the same expression was computed again after that
  backward (``outputs = self.module(ids)``) and left unused: the use takes the fresh value (an
  adversarial step's loss from the perturbed forward pass);
- **sum the losses and backpropagate once**: two backward calls of the same form, the second the
  next backward of the block with nothing between that reads or changes gradients
  (``opt.backward(loss1)``, ``opt.backward(loss2)``; ``a.backward()``, ``b = f(x)``,
  ``b.backward()``), become one call on the sum, where the second one is (where the first is when
  they are adjacent)."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.context import FileContext
from fixer.edits.values import replace_edit
from fixer.nodes import walk
from fixer.rule import Edit
from fixer.runtime.report import Finding, Piece
from fixer.runtime.repair.candidate import Candidate, candidate, context, enclosing_function, statement_at


def _single_assignment(stmt: Optional[ast.stmt]) -> Optional[tuple[str, ast.expr]]:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id, stmt.value
    return None


def fresh_value(finding: Finding, built: Piece, freed: Piece, used: Piece) -> Iterator[Candidate]:
    ctx = context(used.filename)
    built_ctx = context(built.filename)
    if ctx is None or built_ctx is None or freed.filename != used.filename:
        return
    stale = _single_assignment(statement_at(built_ctx, built.line))
    use = statement_at(ctx, used.line)
    if stale is None or use is None:
        return
    name, expression = stale
    text = ast.unparse(expression)
    function = enclosing_function(ctx, use)
    for stmt in walk(function):
        fresh = _single_assignment(stmt) if isinstance(stmt, ast.stmt) and freed.line < stmt.lineno < used.line else None
        if fresh is None or fresh[0] == name or ast.unparse(fresh[1]) != text:
            continue
        edits = [replace_edit(ctx, n, fresh[0]) for n in walk(use) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
        found = candidate(f"use `{fresh[0]}` (line {stmt.lineno} builds it again) for the stale `{name}` at line {used.line}", ctx, edits, finding)
        if found is not None:
            yield found


def _backward_form(ctx: FileContext, stmt: ast.stmt) -> Optional[tuple[str, ast.expr, ast.Call]]:
    """(the call's form, its loss, the call) of ``loss.backward(...)`` or ``f(loss, ...)`` as a statement."""
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return None
    call = stmt.value
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "backward" and not call.args:
        rest = ", ".join(ast.unparse(k) for k in call.keywords)
        return f"?.backward({rest})", func.value, call
    if call.args and "backward" in ast.unparse(func):
        rest = ", ".join([ast.unparse(a) for a in call.args[1:]] + [ast.unparse(k) for k in call.keywords])
        return f"{ast.unparse(func)}(?, {rest})", call.args[0], call
    return None


def sum_losses(finding: Finding, first: Piece) -> Iterator[Candidate]:
    ctx = context(first.filename)
    stmt = statement_at(ctx, first.line) if ctx is not None else None
    form = _backward_form(ctx, stmt) if stmt is not None else None
    parent = ctx.parent(stmt) if form is not None else None
    body = next((b for b in (getattr(parent, f, None) for f in ("body", "orelse", "finalbody")) if isinstance(b, list) and stmt in b), None)
    if body is None or "retain_graph" in form[0]:
        return
    later = _next_backward(ctx, body, body.index(stmt), form)
    if later is None:
        return
    second, other = later
    one, two = ctx.text(form[1]), ctx.text(other[1])
    if second is body[body.index(stmt) + 1]:  # right after it: the sum where the first one was
        total = f"({one} + {two})" if form[0].startswith("?.") else f"{one} + {two}"
        edits = [replace_edit(ctx, form[1], total), Edit(ctx.line_start(second.lineno), ctx.line_end(second.end_lineno), "")]
    else:  # the second loss is built after the first backward: the sum where the second one is
        total = f"({two} + {one})" if form[0].startswith("?.") else f"{two} + {one}"
        edits = [Edit(ctx.line_start(stmt.lineno), ctx.line_end(stmt.end_lineno), ""), replace_edit(ctx, other[1], total)]
    found = candidate(f"backpropagate `{one}` and `{two}` once, summed (lines {stmt.lineno}-{second.lineno})", ctx, edits, finding)
    if found is not None:
        yield found


def _next_backward(ctx: FileContext, body: list[ast.stmt], index: int, form) -> Optional[tuple[ast.stmt, tuple]]:
    """The next statement of ``body`` after ``body[index]`` that backpropagates in the same form,
    when nothing between reads or changes gradients (a step, a ``zero_grad``, a clip, ``.grad``,
    another backward) nor rebinds a name of the first loss: the two backward calls then add the
    same gradients as one call on the sum."""
    names = {n.id for n in walk(form[1]) if isinstance(n, ast.Name)}
    for stmt in body[index + 1 :]:
        other = _backward_form(ctx, stmt)
        if other is not None:
            return (stmt, other) if other[0] == form[0] else None
        for node in walk(stmt):
            if isinstance(node, ast.Attribute) and node.attr in GRADIENT_USES or isinstance(node, ast.Name) and node.id in names and not isinstance(node.ctx, ast.Load):
                return None
    return None


GRADIENT_USES = frozenset({"grad", "step", "zero_grad", "backward", "clip_grad_norm_", "clip_grad_value_", "unscale_"})
