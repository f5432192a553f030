"""Tensors made to require grad after they were created: ``C.requires_grad = True`` or
``C.requires_grad_()`` as a statement, or either applied to the variable of a ``for`` over a list
or tuple display of names (``for p in [C, W]:``) or over a name the scope binds only to such a
display (``parameters = [C, W]`` ... ``for p in parameters:``). After that statement the tensor is
a leaf that requires grad, as if it had been created with ``requires_grad=True``: what is computed
from it builds a graph."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.assignments import scope_assignments
from fixer.analysis.carried_flow import end_position, position
from fixer.analysis.names import dotted
from fixer.analysis.scopes import Scope, nodes_of
from fixer.context import FileContext

FLIPPING = frozenset({ast.Assign, ast.Expr, ast.For})


def flipped_before(ctx: FileContext, scope: Scope, name: str, at: ast.AST) -> bool:
    """A statement of ``scope`` that ends before ``at`` makes ``name``'s tensor require grad."""
    return any(flipped == name and end_position(stmt) <= position(at) for flipped, stmt in _flips(ctx, scope))


def _flips(ctx: FileContext, scope: Scope) -> list[tuple[str, ast.stmt]]:
    def compute() -> list[tuple[str, ast.stmt]]:
        found = []
        for stmt in nodes_of(scope, FLIPPING):
            if isinstance(stmt, ast.For):
                if isinstance(stmt.target, ast.Name) and any(_flipped(s) == stmt.target.id for s in stmt.body):
                    found += [(n, stmt) for n in _elements(ctx, scope, stmt.iter, stmt)]
            elif (flipped := _flipped(stmt)) is not None:
                found.append((flipped, stmt))
        return found

    return ctx.memo(("grad_flips", id(scope.node)), compute)


def _flipped(stmt: ast.stmt) -> Optional[str]:
    """The name ``x.requires_grad = True`` or ``x.requires_grad_()`` (``(True)``) makes require grad."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute):
        target = stmt.targets[0]
        if target.attr == "requires_grad" and isinstance(stmt.value, ast.Constant) and stmt.value.value is True:
            return dotted(target.value)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        call = stmt.value
        flag = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "requires_grad"), None)
        if call.func.attr == "requires_grad_" and (flag is None or isinstance(flag, ast.Constant) and flag.value is True):
            return dotted(call.func.value)
    return None


def _elements(ctx: FileContext, scope: Scope, iterable: ast.expr, at: ast.AST) -> list[str]:
    """The names a display lists, or the display every binding of the name reaching ``at`` is."""
    if isinstance(iterable, ast.Name):
        defs = scope_assignments(ctx, scope).reaching(iterable.id, at)
        displays = [v for _, v in defs]
        if not displays or not all(isinstance(v, (ast.List, ast.Tuple)) for v in displays):
            return []
        return [n for v in displays for n in _elements(ctx, scope, v, at)]
    if isinstance(iterable, (ast.List, ast.Tuple)):
        names = [dotted(e) for e in iterable.elts]
        return [n for n in names if n is not None]
    return []
