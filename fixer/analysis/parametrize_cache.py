"""The cache of ``torch.nn.utils.parametrize.cached()`` held across training iterations.

Inside the context every parametrized tensor (the weight of ``orthogonal(layer)``,
``weight_norm``, ``spectral_norm``, anything ``register_parametrization`` registers) is computed
on its first access and reused until the context exits: a graph built once, in the first
iteration. A context entered around a loop whose every iteration backpropagates makes the second
backward walk the graph the first one freed (and every step reads the weight from before the
first update).

``cached_across_iterations(ctx)`` lists (with statement, loop): the with statement enters the
cache, the loop lies in its body in the same function, some backward runs in every iteration of
the loop and frees its graph, and the file registers a parametrization (without one the cache
holds nothing). The loop is the innermost loop around that backward: one step."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.calls import backward_calls, frees_graph
from fixer.analysis.graph_reuse import innermost_loop, inside, repeats_per_iteration
from fixer.analysis.names import qualified
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.analysis.training_calls import training_calls
from fixer.context import FileContext
from fixer.nodes import walk

CACHE_CONTEXT = "torch.nn.utils.parametrize.cached"
PARAMETRIZATIONS = frozenset({
    "torch.nn.utils.parametrize.register_parametrization",
    "torch.nn.utils.parametrizations.orthogonal",
    "torch.nn.utils.parametrizations.spectral_norm",
    "torch.nn.utils.parametrizations.weight_norm",
})

CachedLoop = tuple[ast.With, ast.AST]


def cached_across_iterations(ctx: FileContext) -> list[CachedLoop]:
    if not _registers_parametrization(ctx):
        return []
    found: list[CachedLoop] = []
    for scope in scopes(ctx):
        for statement in scope_nodes(scope):
            if isinstance(statement, ast.With) and any(_enters_cache(ctx, item.context_expr) for item in statement.items):
                loop = _stepping_loop(ctx, scope, statement)
                if loop is not None:
                    found.append((statement, loop))
    return found


def _enters_cache(ctx: FileContext, expr: ast.expr) -> bool:
    return isinstance(expr, ast.Call) and qualified(ctx, expr.func) == CACHE_CONTEXT


def _registers_parametrization(ctx: FileContext) -> bool:
    """(Cheap first: a call that names one, directly or through an import, has "parametriz" in the
    file's text, in the import or in the call's dotted name.)"""
    return ctx.memo("registers_parametrization", lambda: "parametriz" in ctx.source and any(
        isinstance(node, ast.Call) and qualified(ctx, node.func) in PARAMETRIZATIONS for node in walk(ctx.tree)
    ))


def _stepping_loop(ctx: FileContext, scope: Scope, statement: ast.With) -> Optional[ast.AST]:
    """The innermost loop, inside ``statement``, of a backward (or a step function that
    backpropagates on every call) that frees its graph in every iteration."""
    for call in backward_calls(ctx, scope) + training_calls(ctx, scope):
        if not inside(ctx, call.node, statement) or not frees_graph(call):
            continue
        loop = innermost_loop(ctx, call.node, statement)
        if loop is not None and repeats_per_iteration(ctx, call, loop):
            return loop
    return None
