"""Does an object's reset method run between the backward calls of a training loop?

``reset_between_backwards(ctx, method)`` is False only when it is proven that it does not: every
use of the method's name in the file is a call statement ``<object>.method()`` in a function (or
the module) that backpropagates itself or through a step function of this file it calls
(``train_step(model, x)``, ``trainer.step()``), none of them inside the innermost loop around any
of those backward or step calls, and one of them is in a loop. A document loop that
resets a memory (``model.attn.reset_memory()``) around a segment loop that backpropagates every
segment leaves the memory carried from one segment's backward to the next. True otherwise:
a reset called from elsewhere (another method, a callback) may run between any two backwards.
With ``across`` (a class other files use), the uses of the name in every file around that names
it (``importers.neighbours_naming``) are read the same way, each in its own file."""

from __future__ import annotations

import ast

from fixer.analysis.call_sites import uses_of
from fixer.analysis.calls import backpropagating_nodes
from fixer.analysis.importers import neighbours_naming
from fixer.analysis.scopes import enclosing_loops
from fixer.context import FileContext


def reset_between_backwards(ctx: FileContext, method: str, across: bool = False) -> bool:
    return ctx.memo(("reset_between_backwards", method, across), lambda: _between(ctx, method, across))


def _between(ctx: FileContext, method: str, across: bool) -> bool:
    uses = [(ctx, scope, node) for scope, node in uses_of(ctx, method)]
    for other in neighbours_naming(ctx, method) if across else ():
        uses += [(other, scope, node) for scope, node in uses_of(other, method)]
    if not uses:
        return True  # never called: whoever calls it is unknown
    looped = False
    for own, scope, node in uses:
        parent = own.parent(node)
        statement = own.parent(parent)
        if not (isinstance(node, ast.Attribute) and isinstance(parent, ast.Call) and parent.func is node):
            return True  # passed on as a value
        if not (isinstance(statement, ast.Expr) and statement.value is parent) or node.value is None:
            return True
        if isinstance(node.value, ast.Name) and node.value.id == scope.self_name:
            return True  # called by the object's own methods
        points = backpropagating_nodes(own, scope)
        if not points:
            return True
        for point in points:
            loops = enclosing_loops(own, point, scope)
            if loops and any(a is loops[0] for a in own.ancestors(statement)):
                return True
            looped = looped or bool(loops)
    return not looped
