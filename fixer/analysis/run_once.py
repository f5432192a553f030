"""Functions that run at most once: setup code.

The module body runs once, ``__init__`` once per object. Another function or method runs once when
the file names it only in calls that are in no loop or comprehension of their scope, and those
scopes run once themselves (``model.compile()`` at the top of the script, ``self.build()`` in
``__init__``, ``main()`` calling ``setup(model)``). A function never called, passed as a value,
or called on recursion is not known to run once."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.call_sites import uses_of
from fixer.analysis.scopes import LOOPS, Scope
from fixer.context import FileContext

REPEATING = (*LOOPS, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)  # may run many times


def runs_once(ctx: FileContext, scope: Scope, _seen: Optional[frozenset[int]] = None) -> bool:
    node = scope.node
    if isinstance(node, ast.Module) or scope.self_name and node.name == "__init__":
        return True
    seen = (_seen or frozenset()) | {id(node)}
    uses = uses_of(ctx, node.name)
    return bool(uses) and all(
        _called_once_here(ctx, caller, use) and id(caller.node) not in seen and runs_once(ctx, caller, seen)
        for caller, use in uses
    )


def _called_once_here(ctx: FileContext, caller: Scope, use: ast.AST) -> bool:
    parent = ctx.parent(use)
    if not (isinstance(parent, ast.Call) and parent.func is use):
        return False  # passed as a value: called who knows when
    for ancestor in ctx.ancestors(parent):
        if ancestor is caller.node:
            return True
        if isinstance(ancestor, REPEATING):
            return False
    return False
