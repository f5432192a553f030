"""Tests that hold on every pass of their loop, decided by what the loop itself binds.

``for j in range(n): if j % 1 == 0:`` (an integer counter modulo 1), ``if j >= 0:`` over a
``range`` that starts at a non-negative constant and counts up (or an ``enumerate`` counter from
0), and ``for head in heads: if head is not None:`` where every element of the iterated list is a
constant other than None, a display, or a construction of a torch class (a literal or
comprehension, iterated directly or through a name bound once and read nowhere else, so nothing
can add a None to it). The name the test reads must not be rebound in the loop's body. Anything
else is not decided: the guard stays a condition."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.names import qualified
from fixer.analysis.scopes import statement_index
from fixer.context import FileContext
from fixer.nodes import walk

DISPLAYS = (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.JoinedStr)


def always_holds(ctx: FileContext, test: ast.expr, loop: ast.AST) -> bool:
    """``test`` is true on every pass of ``loop`` (a ``for`` whose pass holds the test)."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return False
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return all(always_holds(ctx, value, loop) for value in test.values)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.comparators[0], ast.Constant)):
        return False
    left, op, right = test.left, test.ops[0], test.comparators[0].value
    if not isinstance(op, (ast.Eq, ast.GtE, ast.IsNot)):
        return False
    rebound = ctx.memo(("loop_rebound", id(loop)), lambda: {n.id for s in loop.body for n in walk(s) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)})
    counter = _counter(loop)
    if counter is not None and counter not in rebound:
        if isinstance(op, ast.Eq) and _is_int(right, 0) and isinstance(left, ast.BinOp) and isinstance(left.op, ast.Mod):
            return isinstance(left.left, ast.Name) and left.left.id == counter and isinstance(left.right, ast.Constant) and _is_int(left.right.value, 1)
        if isinstance(op, ast.GtE) and _is_int(right, 0) and isinstance(left, ast.Name) and left.id == counter:
            return _counts_up_from_non_negative(loop.iter)
    if isinstance(op, ast.IsNot) and right is None and isinstance(left, ast.Name) and isinstance(loop.target, ast.Name):
        return left.id == loop.target.id and left.id not in rebound and _never_none_elements(ctx, loop)
    return False


def _is_int(value: object, expected: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == expected


def _counter(loop: ast.For) -> Optional[str]:
    """The name bound to an integer each pass: ``for i in range(...)``, ``for i, x in enumerate(...)``."""
    it, target = loop.iter, loop.target
    func = it.func.id if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) else None
    if func == "range" and isinstance(target, ast.Name):
        return target.id
    if func == "enumerate" and isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name):
        return target.elts[0].id
    return None


def _counts_up_from_non_negative(it: ast.Call) -> bool:
    args = it.args
    if it.func.id == "enumerate":
        start = args[1] if len(args) > 1 else next((k.value for k in it.keywords if k.arg == "start"), None)
        return start is None or isinstance(start, ast.Constant) and _non_negative(start.value)
    if it.keywords or not args:
        return False
    if len(args) == 1:
        return True
    step_up = len(args) == 2 or isinstance(args[2], ast.Constant) and _non_negative(args[2].value)
    return step_up and isinstance(args[0], ast.Constant) and _non_negative(args[0].value)


def _non_negative(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _never_none_elements(ctx: FileContext, loop: ast.For) -> bool:
    items = loop.iter
    if isinstance(items, ast.Name):
        items = _only_binding(ctx, items, loop)
    if isinstance(items, (ast.List, ast.Tuple)):
        return all(_never_none(ctx, e) for e in items.elts)
    return isinstance(items, ast.ListComp) and _never_none(ctx, items.elt)


def _only_binding(ctx: FileContext, name: ast.Name, loop: ast.For) -> Optional[ast.expr]:
    """The value of the one assignment to ``name`` in the file, when the loop's iterable is the
    name's only read (no method call, argument or store could change the list)."""
    uses = _name_uses(ctx).get(name.id, [])
    if len(uses) != 2 or not any(u is name for u in uses):
        return None
    assigns = [a for a in statement_index(ctx).assigns if any(isinstance(t, ast.Name) and t.id == name.id for t in a.targets)]
    if len(assigns) != 1 or len(assigns[0].targets) != 1 or not isinstance(assigns[0].targets[0], ast.Name):
        return None
    assign = assigns[0]
    if (assign.lineno, assign.col_offset) >= (loop.lineno, loop.col_offset) or _function_of(ctx, assign) not in (None, _function_of(ctx, loop)):
        return None  # bound after the loop, or a local of another function
    return assign.value


def _name_uses(ctx: FileContext) -> dict[str, list[ast.Name]]:
    def compute() -> dict[str, list[ast.Name]]:
        found: dict[str, list[ast.Name]] = {}
        for node in walk(ctx.tree):
            if isinstance(node, ast.Name):
                found.setdefault(node.id, []).append(node)
        return found

    return ctx.memo("decided_name_uses", compute)


def _function_of(ctx: FileContext, node: ast.AST) -> Optional[ast.AST]:
    return next((a for a in ctx.ancestors(node) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef))), None)


def _never_none(ctx: FileContext, value: ast.expr) -> bool:
    if isinstance(value, ast.Constant):
        return value.value is not None
    if isinstance(value, DISPLAYS):
        return True
    if isinstance(value, ast.Call):
        name = qualified(ctx, value.func) or ""
        return name.startswith("torch.") and name.rsplit(".", 1)[-1][:1].isupper()  # a torch class: an instance
    return False
