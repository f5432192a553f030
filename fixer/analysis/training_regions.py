"""Whether a loop or a function trains: it backpropagates (``autograd.grad(...,
create_graph=True)`` does not count: it builds a quantity meant to be differentiated again), it
calls a method of a project instance that backpropagates (``agent.update(batch)``, which may return
the loss it backpropagated), or it is a ``LightningModule``'s ``training_step``."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.calls import backpropagates_in, backward_calls, backward_calls_in
from fixer.analysis.graph import Kind, facts
from fixer.analysis.names import last_name
from fixer.analysis.callees import called_function
from fixer.analysis.scopes import RETURNS, Scope, nodes_of, scope_nodes
from fixer.context import FileContext
from fixer.nodes import walk


def frees_graphs_in(ctx: FileContext, scope: Scope, region: ast.AST) -> bool:
    """``backpropagates_in``, where ``autograd.grad(..., create_graph=True)`` does not count: it builds
    a quantity meant to be differentiated again, not the iteration's backward."""
    if not backpropagates_in(ctx, scope, region):
        return False
    calls = backward_calls(ctx, scope) if region is scope.node else backward_calls_in(ctx, scope, region)
    return not calls or any(c.kind != "autograd.grad" or c.flag("create_graph") is False for c in calls)


def instance_method(ctx: FileContext, scope: Scope, func: ast.expr) -> Optional[Scope]:
    """The method ``agent.update`` runs, when ``agent`` only ever holds an instance of one class
    of the project (``Agent(...)`` of this file or imported from another)."""
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)) or func.value.id == scope.self_name:
        return None
    method = called_function(ctx, scope, func)
    return method if method is not None and method.class_node is not None else None


def calls_training_method(ctx: FileContext, scope: Scope, region: ast.AST) -> bool:
    return any(training_methods(ctx, scope, region))


def training_methods(ctx: FileContext, scope: Scope, region: ast.AST) -> Iterator[Scope]:
    """The methods of project instances that backpropagate which the region calls."""
    nodes = scope_nodes(scope) if region is scope.node else walk(region)
    for node in nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            method = instance_method(ctx, scope, node.func)
            if method is not None and backward_calls(method.ctx or ctx, method):
                yield method


def returns_backpropagated(ctx: FileContext, scope: Scope, value: ast.expr) -> bool:
    """``agent.update(...)`` whose method returns, on every path, a name it backpropagated."""
    if not isinstance(value, ast.Call):
        return False
    method = instance_method(ctx, scope, value.func)
    if method is None:
        return False
    home = method.ctx or ctx
    returns = [n.value for n in nodes_of(method, RETURNS) if isinstance(n, ast.Return)]
    backwarded = {call.target_name for call in backward_calls(home, method)} - {None}
    callee = facts(home, method)
    return bool(returns) and all(
        isinstance(v, ast.Name) and v.id in backwarded and callee.kind(v, v) == Kind.GRAPH for v in returns
    )


def framework_training_step(scope: Scope) -> bool:
    """``training_step`` of a ``LightningModule``: the framework backpropagates the loss it returns
    after every call, so a ``self.`` total it adds to outlives one step's graph."""
    if scope.class_node is None or getattr(scope.node, "name", "") != "training_step":
        return False
    return any((last_name(base) or "").endswith("LightningModule") for base in scope.class_node.bases)
