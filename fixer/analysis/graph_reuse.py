"""One graph, several backward passes: what the rules about tensors that outlive their graph share.

- ``derived_names``: names whose value is computed (with a graph) from given names in a region.
- ``reaches(ctx, call, names)``: the backpropagated tensor is one of those names or carries the graph of one.
- ``repeats_per_iteration``: the backward runs in every iteration of a loop that runs more than once.
"""

from __future__ import annotations

import ast
from typing import Iterable, Optional

from fixer.analysis.calls import BackwardCall
from fixer.analysis.graph import GraphFacts, Kind
from fixer.analysis.names import dotted
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.passes import is_pass_filter, pass_body, periodic_guard
from fixer.analysis.scopes import LOOPS
from fixer.analysis.shared_graph import flowing_nodes
from fixer.context import FileContext
from fixer.nodes import walk

def names_in(expr: ast.AST) -> set[str]:
    """Every dotted name mentioned in ``expr`` (``a``, ``self.w``, ``self``)."""
    return {name for node in walk(expr) if (name := dotted(node))}


def inside(ctx: FileContext, node: ast.AST, container: ast.AST) -> bool:
    return any(parent is container for parent in ctx.ancestors(node))


def assigned_names(node: ast.AST) -> list[str]:
    """Names bound by an assignment-like statement (``a, b = ...``, ``x += ...``, ``for i in ...``)."""
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    elif isinstance(node, (ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, ast.NamedExpr):
        targets = [node.target]
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        targets = [node.optional_vars]
    else:
        return []
    found = []
    for target in targets:
        for part in walk(target):
            if isinstance(part, (ast.Name, ast.Attribute)) and isinstance(part.ctx, ast.Store):
                name = dotted(part)
                if name:
                    found.append(name)
    return found


def derived_names(ctx: FileContext, graph: GraphFacts, seeds: set[str], nodes: Iterable[ast.AST]) -> set[str]:
    """``seeds`` plus every name assigned (with a graph) from them among ``nodes``, to a fixpoint
    (a loop carries values around). Assignments under no_grad or of detached values do not count."""
    statements = [n for n in nodes if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr))]
    derived = set(seeds)
    changed = True
    while changed:
        changed = False
        for stmt in statements:
            value = stmt.value
            if value is None or not (names_in(value) & derived) or not (flowing_names(ctx, value) & derived):
                continue
            if under_no_grad(ctx, stmt):
                continue
            if graph.kind(value, stmt) == Kind.NONE:
                continue
            new = set(assigned_names(stmt)) - derived
            if new:
                derived |= new
                changed = True
    return derived


def flowing_names(ctx: FileContext, expr: ast.AST) -> set[str]:
    """``names_in`` restricted to the names a graph flows from: not under ``.detach()``, ``.item()``,
    ``.data`` (``D(fake.detach())`` does not carry ``fake``'s graph)."""
    found: set[str] = set()
    for node in flowing_nodes(ctx, expr):
        if isinstance(node, (ast.Name, ast.Attribute)):
            found |= names_in(node)
    return found


def reaches(ctx: FileContext, call: BackwardCall, names: set[str]) -> bool:
    """A name read only under ``.detach()``, ``.data`` or ``.item()`` gives the backward nothing to
    walk (``train_step(fake.detach())`` does not backpropagate ``fake``'s graph)."""
    return bool(flowing_names(ctx, call.target) & names)


def repeats_per_iteration(ctx: FileContext, call: BackwardCall, loop: ast.AST) -> bool:
    """True if ``call`` runs in every iteration of ``loop`` (or every pass a filter or a periodic
    ``if i % k == 0`` selects) and the loop runs more than once: no other ``if`` around it inside
    the loop, no unconditional ``break``/``return`` ending the first iteration, not ``range(1)``."""
    for parent in ctx.ancestors(call.node):
        if parent is loop:
            break
        if is_pass_filter(ctx, parent) or periodic_guard(ctx, parent, loop):
            continue  # the backward runs on every pass the filter (or ``i % k == 0``) selects
        if isinstance(parent, (ast.If, ast.IfExp, ast.ExceptHandler, getattr(ast, "Match", ast.If))):
            return False
        if isinstance(parent, ast.Try) and any(inside(ctx, call.node, s) or s is call.node for s in parent.orelse):
            return False
    if _ends_first_iteration(pass_body(loop)):
        return False
    if isinstance(loop, (ast.For, ast.AsyncFor)) and _single_iteration(loop.iter):
        return False
    return True


def _ends_first_iteration(body: list[ast.stmt]) -> bool:
    for stmt in body:
        if isinstance(stmt, (ast.Break, ast.Return, ast.Raise)):
            return True
        if isinstance(stmt, (ast.With, ast.AsyncWith)) and _ends_first_iteration(stmt.body):
            return True
    return False


def _single_iteration(iterable: ast.expr) -> bool:
    if isinstance(iterable, (ast.List, ast.Tuple)):
        return len(iterable.elts) <= 1
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range":
        args = iterable.args
        if len(args) == 1 and isinstance(args[0], ast.Constant) and isinstance(args[0].value, int):
            return args[0].value <= 1
    return False


def innermost_loop(ctx: FileContext, node: ast.AST, stop: ast.AST) -> Optional[ast.AST]:
    for parent in ctx.ancestors(node):
        if parent is stop:
            return None
        if isinstance(parent, LOOPS):
            return parent
    return None


def flows_straight(ctx: FileContext, graph: GraphFacts, stmt: ast.stmt, later: Iterable[ast.AST], call: BackwardCall) -> bool:
    """The value ``stmt`` assigns reaches the tensor ``call`` backpropagates, following ``later``
    (the statements between them, in order, run once): a name rebound from other values no longer
    carries it (``output = D(fake)`` for one loss, ``output = D(real)`` for the next), and a name
    read only under ``.detach()``, ``.data`` or ``.item()`` passes nothing on."""
    live = set(assigned_names(stmt))
    for node in later:
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or node.value is None or node is stmt:
            continue
        targets = set(assigned_names(node))
        mentioned = ctx.memo(("flowing_names", id(node.value)), lambda: flowing_names(ctx, node.value))
        carries = bool(mentioned & live) and not under_no_grad(ctx, node) and graph.kind(node.value, node) != Kind.NONE
        if carries:
            live |= targets
        elif not isinstance(node, ast.AugAssign):
            live -= targets
    return reaches(ctx, call, live)
