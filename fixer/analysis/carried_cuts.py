"""How a value carried into the next iteration (``fixer.analysis.carried``) is cut, and where:
which cut it calls for (``cut_kind``: its per-episode buffers emptied, the graphs it stores
detached, or the value detached at the iteration boundary), the shape the cut detaches, the
statement of the iteration body that holds a node, an ``if state is not None:`` guard, a no-op
``for s in state: s.detach()`` the cut replaces, and the ``retain_graph=True`` band-aid on the
iteration's only backward."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.calls import backward_calls
from fixer.analysis.carried import CarriedValue, Iteration
from fixer.analysis.carried_flow import inside, position
from fixer.analysis.episode_buffers import only_through_container
from fixer.analysis.graph import Kind, facts
from fixer.analysis.names import dotted
from fixer.analysis.number_starts import is_number, may_start_as_number
from fixer.analysis.object_fields import is_tensor_buffer
from fixer.analysis.scopes import scope_nodes, scope_of
from fixer.context import FileContext
from fixer.nodes import walk

EMPTY_BUFFERS, DETACH_STORES, DETACH_AT_BOUNDARY = "empty buffers", "detach stores", "detach at boundary"


def cut_kind(ctx: FileContext, value: CarriedValue) -> str:
    """Buffers whose entries reach the loss only through the container, read in the pass that
    fills them, are emptied (``EMPTY_BUFFERS``); another container stores detached values
    (``DETACH_STORES``); a value is detached where the iteration starts (``DETACH_AT_BOUNDARY``)."""
    if value.container and value.read_after_store and only_through_container(ctx, value) and not is_tensor_buffer(ctx, value.initial):
        return EMPTY_BUFFERS
    return DETACH_STORES if value.container else DETACH_AT_BOUNDARY


def cut_shape(value: CarriedValue) -> str:
    """What the cut detaches: a value that starts as a number is a tensor once it is carried."""
    return "tensor" if is_number(value.initial) else value.shape


def starts_as_number(ctx: FileContext, scope, value: CarriedValue) -> bool:
    """A number (surely or maybe) on the first pass: a tensor, with ``detach``, only from the second."""
    return is_number(value.initial) or may_start_as_number(ctx, scope, value)


def stored_graphs(ctx: FileContext, scope, value: CarriedValue) -> list[ast.expr]:
    """The stored values (or the tuple items of one) that carry a graph into the container."""
    graph = facts(ctx, scope)
    return [
        part for stmt, stored in value.stores for part in (stored.elts if isinstance(stored, ast.Tuple) else [stored])
        if graph.kind(part, stmt) == Kind.GRAPH
    ]


def body_statement(ctx: FileContext, iteration: Iteration, node: ast.AST) -> Optional[ast.stmt]:
    """The statement of the iteration's body that is or holds ``node``."""
    for parent in [node, *ctx.ancestors(node)]:
        if any(parent is s for s in iteration.body):
            return parent
    return None


def read_after(value: CarriedValue, names: list[str], stmt: ast.stmt) -> bool:
    """The iteration reads one of the attributes ``names`` after ``stmt`` ends."""
    return any(
        isinstance(node, ast.Attribute) and dotted(node) in names and position(node) > (stmt.end_lineno, 0)
        for node in walk(value.iteration.node)
    )


def noop_detach_loop(stmt: ast.stmt, name: str) -> bool:
    """``for s in name: s.detach()``: a loop whose body only drops ``detach()`` results."""
    if not isinstance(stmt, ast.For) or stmt.orelse or dotted(stmt.iter) != name or not isinstance(stmt.target, ast.Name):
        return False
    return all(
        isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and not s.value.args and isinstance(s.value.func, ast.Attribute)
        and s.value.func.attr == "detach" and dotted(s.value.func.value) == stmt.target.id
        for s in stmt.body
    )


def target_read_elsewhere(ctx: FileContext, loop: ast.For) -> bool:
    """The loop's variable is read outside the loop (``return state, s``): the loop stays."""
    name = loop.target.id
    inner = {id(n) for n in walk(loop)}
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and id(n) not in inner
        for n in scope_nodes(scope_of(ctx, loop))
    )


def is_not_none_test(stmt: ast.stmt, name: str) -> bool:
    """``if name is not None:``"""
    test = getattr(stmt, "test", None)
    return (
        isinstance(stmt, ast.If)
        and isinstance(test, ast.Compare)
        and dotted(test.left) == name
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.IsNot)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )


def band_aid(ctx: FileContext, scope, value: CarriedValue) -> bool:
    """The iteration's only backward call passes ``retain_graph=True``."""
    call = value.iteration.backward
    if call.keyword("retain_graph") is None or call.flag("retain_graph") is not True:
        return False
    return len([c for c in backward_calls(ctx, scope) if inside(ctx, c.node, value.iteration.node)]) == 1
