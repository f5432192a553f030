"""Instances of this file's classes, judged by their methods' bodies, never by the class name
(``callees.instance_class`` finds the class a call ``Cls(...)`` instantiates).

``keeps_argument(ctx, cls, method, index)`` says whether ``obj.method(value, ...)`` stores its
argument at ``index`` (the first by default; or something computed from it) on the object:
``self.sum += value * n`` keeps it, ``self.sum += value.item() * n`` or ``self.total +=
float(value)`` does not. None when the method cannot be seen."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.names import dotted
from fixer.analysis.scopes import scope_nodes, scopes
from fixer.analysis.shared_graph import flowing_nodes
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.analysis.vocabulary import MERGES, SEQUENCE_ADDS, SET_ADDS

STORING_METHODS = SEQUENCE_ADDS | SET_ADDS | MERGES


def keeps_argument(ctx: FileContext, cls: ast.ClassDef, method: str, index: int = 0) -> Optional[bool]:
    scope = next((s for s in scopes(ctx) if s.class_node is cls and getattr(s.node, "name", None) == method), None)
    if scope is None or not scope.self_name:
        return None
    params = [a.arg for a in scope.node.args.posonlyargs + scope.node.args.args][1:]
    if len(params) <= index:
        return False
    nodes = scope_nodes(scope)
    derived = {params[index]}  # the argument and the local names computed from it
    changed = True
    while changed:
        changed = False
        for node in nodes:
            if isinstance(node, ast.Assign) and _flowing_names(ctx, node.value) & derived:
                new = {n.id for t in node.targets for n in walk(t) if isinstance(n, ast.Name)} - derived
                derived |= new
                changed = changed or bool(new)
    for node in nodes:
        stored = _stored_on_self(node, scope.self_name)
        if stored is not None and _flowing_names(ctx, stored) & derived:
            return True
    return False


def _stored_on_self(node: ast.AST, self_name: str) -> Optional[ast.expr]:
    """The value ``node`` stores on the object: ``self.x = v``, ``self.x += v``, ``self.xs.append(v)``."""
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any((dotted(t) or "").startswith(f"{self_name}.") for t in targets):
            return node.value
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute):
        call = node.value
        if call.func.attr in STORING_METHODS and (dotted(call.func.value) or "").startswith(f"{self_name}.") and call.args:
            return ast.Tuple(elts=list(call.args), ctx=ast.Load())
    return None


def _flowing_names(ctx: FileContext, expr: ast.expr) -> set[str]:
    """Names whose graph flows into ``expr`` (not read through ``.item()``, ``.detach()``, ``float()``)."""
    return {n.id for n in flowing_nodes(ctx, expr) if isinstance(n, ast.Name)}
