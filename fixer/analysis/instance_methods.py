"""Which project method a call through an instance runs: ``opt.backward(loss)`` runs
``ScaledOptimizer.backward`` when every binding of ``opt`` constructs ``ScaledOptimizer`` (a class
of this file or of another project file, ``callees.called_function``) and that class defines
``backward``; also when the receiver is read back from a holder (``out["opt"]``, held_values). A fact about what the receiver holds, never about its name: a receiver that cannot
be resolved gives None (it may be a tensor)."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.callees import called_function
from fixer.analysis.held_values import held_receiver
from fixer.analysis.scopes import Scope, scopes
from fixer.context import FileContext


def instance_method(ctx: FileContext, call: ast.Call) -> Optional[Scope]:
    """The method of a project class that ``name.method(...)`` or ``self.field.method(...)`` (an
    instance the object holds for life) runs, or None."""
    scope = enclosing_scope(ctx, call)
    func = held_receiver(ctx, scope, call.func)  # out["opt"].backward(loss): the held object's method
    receiver = func.value if isinstance(func, ast.Attribute) else None
    if not isinstance(receiver, ast.Name) and not (isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name)):
        return None
    callee = called_function(ctx, scope, func)
    if callee is None or callee.class_node is None or callee.self_name is None or callee.node.name != func.attr:
        return None
    return callee


def enclosing_scope(ctx: FileContext, node: ast.AST) -> Scope:
    """The innermost function (or the module) that contains ``node``."""
    by_node = ctx.memo("scopes_by_node", lambda: {id(s.node): s for s in scopes(ctx)})
    return next((by_node[id(a)] for a in ctx.ancestors(node) if id(a) in by_node), by_node[id(ctx.tree)])
