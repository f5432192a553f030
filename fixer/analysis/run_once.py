"""Functions that run at most once: setup code.

The module body runs once, ``__init__`` once per object. Another function or method runs once when
the file names it only in calls that are in no loop or comprehension of their scope, and those
scopes run once themselves (``model.compile()`` at the top of the script, ``self.build()`` in
``__init__``, ``main()`` calling ``setup(model)``), and so are its calls in the other files of the
project (``project_callers``: a script running ``main()`` of this file at its top). A function
never called, passed as a value (here or in another file), or called on recursion is not known to
run once."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.call_sites import uses_of
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.scopes import LOOPS, Scope
from fixer.context import FileContext

REPEATING = (*LOOPS, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)  # may run many times


def runs_once(ctx: FileContext, scope: Scope, _seen: Optional[frozenset[int]] = None) -> bool:
    node = scope.node
    if isinstance(node, ast.Module) or scope.self_name and node.name == "__init__":
        return True
    seen = (_seen or frozenset()) | {id(node)}
    uses = [(ctx, caller, use) for caller, use in uses_of(ctx, node.name)]
    for own, caller, call in project_call_sites(ctx, scope):
        if own.path != ctx.path:  # (this file's uses are all above, by name)
            uses.append((own, caller, call.func if call is not None else None))
    return bool(uses) and all(
        use is not None and _called_once_here(own, caller, use) and id(caller.node) not in seen and runs_once(own, caller, seen)
        for own, caller, use in uses
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
