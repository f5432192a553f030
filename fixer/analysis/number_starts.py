"""Values that may start as a plain number (``total = 0``, ``total = start()`` where a project
function returns ``0.0`` or a function graphfix cannot see into starts a running total): they
have no ``detach`` before they first become a tensor."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.carried import CarriedValue
from fixer.analysis.names import dotted, qualified
from fixer.analysis.callees import called_function
from fixer.analysis.scopes import scope_nodes
from fixer.context import FileContext


def is_number(value: Optional[ast.expr]) -> bool:
    return isinstance(value, ast.Constant) and type(value.value) in (int, float)


def may_start_as_number(ctx: FileContext, scope, value: CarriedValue) -> bool:
    """The value starts from a call outside torch that may give a number, which has no ``detach``:
    a project function with a ``return 0.0``, or a function graphfix cannot see into giving the
    start of a running total (``total = start_total()`` ... ``total += loss``)."""
    initial = value.initial
    if not isinstance(initial, ast.Call) or (qualified(ctx, initial.func) or "").startswith("torch."):
        return False
    returns_number = _returns_number(ctx, scope, initial, 3)
    if returns_number is not None:
        return returns_number
    stmt = ctx.statement_of(value.read)
    if isinstance(stmt, ast.AugAssign):
        return dotted(stmt.target) == value.name
    return isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.BinOp) and any(dotted(t) == value.name for t in stmt.targets)


def _returns_number(ctx: FileContext, scope, call: ast.Call, depth: int) -> Optional[bool]:
    """Some ``return`` of the project function ``call`` runs gives a number (``return 0.0``, or the
    result of another such function); None when the function cannot be seen."""
    callee = called_function(ctx, scope, call.func)
    if depth == 0 or callee is None or isinstance(callee.node, ast.Module):
        return None
    own = callee.ctx or ctx
    for node in scope_nodes(callee):
        if isinstance(node, ast.Return) and is_number(node.value):
            return True
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Call) and _returns_number(own, callee, node.value, depth - 1):
            return True
    return False
