"""A module's state reset through a flag: a method sets ``self.<flag> = True`` (``reset_state()``)
and the forward path, before reading the state, refills it when the flag is set::

    def forward(self, x):
        if self.should_reset:
            self.last_hidden = x
            self.should_reset = False
        h = self.body(torch.cat([x, self.last_hidden], 1))

When that method runs between two backwards, every read of the state after the guarded refill sees
a value of the same step, never the previous step's graph: the state is managed, as it is by a
method that stores a fresh value into it directly. When the flag is set only once (in ``__init__``
or a reset the training code calls outside the loop around its backwards), the refill runs at the
first call only and the state is carried."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.carried_flow import contains, position, surely_defines
from fixer.analysis.graph import facts
from fixer.analysis.importers import class_importers
from fixer.analysis.names import dotted
from fixer.analysis.reset_calls import reset_between_backwards
from fixer.analysis.scopes import Scope, scope_nodes, statement_index
from fixer.context import FileContext

SETUP = frozenset({"__init__", "reset_parameters", "_reset_parameters", "extra_repr"})


def reset_may_run_between_backwards(ctx: FileContext, reset: Scope) -> bool:
    """The reset method may run between two backward calls: it is called so in this file or, when
    other files use a class of this file (the object may be held by another one's), in a file
    around that names it (each of its uses read there)."""
    used = any(class_importers(ctx, c) for c in statement_index(ctx).classes if ctx.parent(c) is ctx.tree)
    return reset_between_backwards(ctx, reset.node.name, across=used)


def reset_through_flag(ctx: FileContext, method: Scope, methods: list[Scope], path: list[Scope], attr: str) -> bool:
    """``method`` refills ``self.<attr>`` under ``if self.<flag>:`` before every read of it, and a
    method other than ``method`` (not construction) sets the flag to a true constant on every
    call: on the forward path (each call resets), or a reset that may run between two backwards."""
    refill = _guarded_refill(method, attr)
    if refill is None:
        return False
    flag = dotted(refill.test)[len(method.self_name) + 1 :]
    for other in methods:
        if other is method or other.node.name in SETUP or not _raises(ctx, other, flag):
            continue
        if other in path or reset_may_run_between_backwards(ctx, other):
            return True
    return False


def _guarded_refill(method: Scope, attr: str) -> Optional[ast.If]:
    """A statement ``if self.<flag>:`` of the method's own body whose body surely stores
    ``self.<attr>``, with every read of ``self.<attr>`` in the method inside it or after it."""
    name = f"{method.self_name}.{attr}"
    reads = [n for n in scope_nodes(method) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and dotted(n) == name]
    for stmt in method.node.body:
        if not (isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Attribute)):
            continue
        test = dotted(stmt.test)
        if test is None or test.count(".") != 1 or not test.startswith(f"{method.self_name}."):
            continue
        if not any(surely_defines(s, name) for s in stmt.body):
            continue
        if all(contains(stmt, r) or position(r) > position(stmt) for r in reads):
            return stmt
    return None


def _raises(ctx: FileContext, method: Scope, flag: str) -> bool:
    """``method`` stores a true constant into ``self.<flag>`` outside any branch."""
    name = f"{method.self_name}.{flag}"
    for stmt, value in facts(ctx, method).assignments.get(name, []):
        if isinstance(value, ast.Constant) and value.value is True and stmt in method.node.body:
            return True
    return False
