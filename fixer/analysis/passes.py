"""The passes of a loop when its whole body is guarded: ``for i, b in enumerate(loader): if cond: ...``.

A loop whose body is one ``if`` without ``else`` (beside statements that cannot change what it
reads, such as a ``print``) runs that ``if``'s body on the passes its test selects and does
nothing the selected passes see on the others, exactly as ``if not cond: continue`` would. Those
selected passes are the loop's training iterations: values carried, graphs reused and gradients
accumulated cross from one selected pass to the next as they would without the guard. So every
question about "each iteration" asks about the guard's body (``pass_body``), and the guard does
not make what is inside it conditional (``is_pass_filter``).

A test that selects at most one pass (``i == 0``, ``epoch == last``: an equality on a name the
loop binds) is not a filter: its body runs once, not every iteration."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.context import FileContext
from fixer.nodes import walk

LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)


def is_pass_filter(ctx: FileContext, node: ast.AST, child: Optional[ast.AST] = None) -> bool:
    """``node`` is a filter ``if`` of a loop (``child``, if given, is in its body, not its test)."""
    if not isinstance(node, ast.If) or child is not None and not any(child is s for s in node.body):
        return False
    return _filtered_loop(ctx, node) is not None


def loop_of_pass(ctx: FileContext, block: list[ast.stmt]) -> Optional[ast.AST]:
    """The loop whose body, or whose filter's body, is ``block``."""
    owner = ctx.parent(block[0]) if block else None
    if isinstance(owner, LOOP_TYPES) and owner.body is block:
        return owner
    return _filtered_loop(ctx, owner) if isinstance(owner, ast.If) and owner.body is block else None


def _filtered_loop(ctx: FileContext, node: ast.If) -> Optional[ast.AST]:
    inner, holder = node, ctx.parent(node)
    while isinstance(holder, ast.If) and not holder.orelse and any(s is inner for s in holder.body):
        inner, holder = holder, ctx.parent(holder)
    return holder if isinstance(holder, LOOP_TYPES) and any(f is node for f in filters(holder)) else None


def _inert(others: list[ast.stmt], guard: ast.If) -> bool:
    """The loop body's other statements cannot change what the filter reads (``print(...)``, a
    counter of its own): the passes it skips do nothing the selected ones see. No jump, nothing
    the filter mentions bound, called, or passed to a call; calls take only constants and names."""
    mentioned = {n.id for n in walk(guard) if isinstance(n, ast.Name)}
    for node in (n for stmt in others for n in walk(stmt)):
        if isinstance(node, (ast.Continue, ast.Break, ast.Return, ast.Raise, ast.Yield, ast.YieldFrom, ast.Await)):
            return False
        if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            if _root(node) in mentioned:
                return False
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name).split(".")[0] in mentioned for a in node.names):
            return False
        elif isinstance(node, ast.Call):
            arguments = node.args + [k.value for k in node.keywords]
            if _root(node.func) in mentioned or not all(_plain(a) for a in arguments):
                return False
            if any(_root(n) in mentioned for part in arguments for n in walk(part)):
                return False
    return True


def _plain(argument: ast.expr) -> bool:
    """A constant, a name or a formatted string of them: nothing a call could compute with."""
    if isinstance(argument, ast.JoinedStr):
        return all(_plain(v.value if isinstance(v, ast.FormattedValue) else v) for v in argument.values)
    return isinstance(argument, (ast.Constant, ast.Name))


def _root(node: ast.AST) -> Optional[str]:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def filters(loop: ast.AST) -> list[ast.If]:
    """The filter ``if`` statements, outermost first, that ``pass_body`` steps into (computed once
    per loop and kept on the node, which lives as long as its tree)."""
    found = getattr(loop, "_graphfix_filters", None)
    if found is None:
        found, body = [], loop.body
        while guard := next((s for s in body if _filters(loop, s) and _inert([o for o in body if o is not s], s)), None):
            found.append(guard)
            body = guard.body
        loop._graphfix_filters = found
    return found


def pass_body(loop: ast.AST) -> list[ast.stmt]:
    """The statements one selected pass of ``loop`` runs: its body, or the body of the filter
    ``if`` (recursively) that is its whole body."""
    found = filters(loop)
    return found[-1].body if found else loop.body


def _filters(loop: ast.AST, stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.If) or stmt.orelse:
        return False
    bound = {n.id for n in walk(loop.target) if isinstance(n, ast.Name)} if isinstance(loop, (ast.For, ast.AsyncFor)) else set()
    return not any(
        isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.Is)) for op in node.ops)
        and any(isinstance(n, ast.Name) and n.id in bound for n in walk(node))
        for node in walk(stmt.test)
    )
