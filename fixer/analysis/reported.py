"""Whether a local value is only reported: printed, logged, turned into a number, or returned to
callers that only read numbers from it. Such a value never reaches a backward, so keeping its
autograd graph buys nothing; a total of such values built in an evaluation loop that records
gradients keeps every batch's graph alive."""

from __future__ import annotations

import ast
from typing import Callable

from fixer.analysis.calls import backward_calls
from fixer.analysis.grad_mode import records_gradients, switches_grad_mode
from fixer.analysis.graph import GraphFacts, Kind
from fixer.analysis.graph_reuse import inside
from fixer.analysis.names import dotted
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.retained_walks import returned_only_for_numbers
from fixer.analysis.scopes import Scope, enclosing_loops, scope_nodes, scopes
from fixer.analysis.training_calls import training_calls
from fixer.context import FileContext

TERMINAL_CALLS = frozenset({"print", "float", "round", "str", "format", "len", "repr", "int"})
TERMINAL_METHODS = frozenset({"item", "tolist", "numpy", "log", "info", "debug", "add_scalar", "add_scalars", "set_postfix", "set_description", "write", "format", "append"})


def only_reported(ctx: FileContext, scope: Scope, graph: GraphFacts, name: str, accumulation: ast.stmt, depth: int,
                  is_update: Callable[[ast.stmt, str], bool]) -> bool:
    """Every read of ``name`` in ``scope`` (outside ``accumulation`` and the statements that only
    update it) ends in a print, a log, a number, or a return to callers that only read numbers;
    a copy into another local (``depth`` deep) is followed."""
    for node in scope_nodes(scope):
        if not (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)):
            continue
        if inside(ctx, node, accumulation) or is_update(ctx.statement_of(node), name):
            continue
        child, parent = node, ctx.parent(node)
        while isinstance(parent, (ast.BinOp, ast.JoinedStr, ast.FormattedValue, ast.UnaryOp)):
            child, parent = parent, ctx.parent(parent)
        if isinstance(parent, ast.Call) and child is not parent.func:
            callee = parent.func
            if isinstance(callee, ast.Name) and callee.id in TERMINAL_CALLS:
                continue
            if isinstance(callee, ast.Attribute) and callee.attr in TERMINAL_METHODS - {"item", "tolist", "numpy"}:
                if callee.attr != "append" or _local_list(graph, callee.value):
                    continue
            return False
        if isinstance(parent, ast.Attribute) and parent.attr in ("item", "tolist", "numpy") and child is parent.value:
            continue
        returned = parent if isinstance(parent, ast.Return) else ctx.parent(parent) if isinstance(parent, ast.Tuple) else None
        if isinstance(returned, ast.Return) and returned_only_for_numbers(ctx, scope, returned, child):
            continue
        if isinstance(parent, ast.Assign) and depth and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
            if only_reported(ctx, scope, graph, parent.targets[0].id, parent, depth - 1, is_update):
                continue
        return False
    return True


def _local_list(graph: GraphFacts, receiver: ast.expr) -> bool:
    defs = graph.assignments.get(dotted(receiver) or "", [])
    return bool(defs) and all(isinstance(v, ast.List) and not v.elts for _, v in defs)


def fed_by_graph(graph: GraphFacts, value: ast.expr, at: ast.AST) -> bool:
    """Not a call whose every argument is known to carry no graph (``crit(out.detach(), y)``: a
    criterion of detached values records nothing, though a module's call is taken as a graph)."""
    return not (isinstance(value, ast.Call) and value.args and all(graph.kind(a, at) is Kind.NONE for a in value.args))


def evaluation_loop(ctx: FileContext, scope: Scope, graph: GraphFacts, stmt: ast.stmt, accumulator: str, value: ast.expr,
                    is_update: Callable[[ast.stmt, str], bool]) -> bool:
    """``val_loss += loss`` in a loop that does not backpropagate, in a function that records gradients (its own backward, a
    step function's, or its callers': grad_mode) and never switches the mode, when the total is a local only printed, logged,
    turned into a number or returned to callers that do so: each batch's graph lives until the loop ends."""
    training = backward_calls(ctx, scope) + training_calls(ctx, scope)  # its own backward, or a step function's
    if "." in accumulator or not enclosing_loops(ctx, stmt, scope):
        return False
    if switches_grad_mode(ctx, scope):
        return False  # the function switches gradient recording itself
    if not graph.carries_graph(value, stmt):
        return False
    if isinstance(scope.node, ast.Module) and any(
        isinstance(n, ast.Name) and n.id == accumulator for other in scopes(ctx) if other.node is not scope.node for n in scope_nodes(other)
    ):
        return False  # a function of this module reads the total
    if not only_reported(ctx, scope, graph, accumulator, stmt, 2, is_update):
        return False
    # last, as it may read the callers in other files: nothing else shows the function runs with gradients on
    return any(not under_no_grad(ctx, call.node) for call in training) or records_gradients(ctx, scope)
