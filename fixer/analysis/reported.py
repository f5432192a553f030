"""Whether a local value is only reported: printed, logged, turned into a number, or returned to
callers that only read numbers from it. Such a value never reaches a backward, so keeping its
autograd graph buys nothing."""

from __future__ import annotations

import ast
from typing import Callable

from fixer.analysis.graph import GraphFacts
from fixer.analysis.graph_reuse import inside
from fixer.analysis.names import dotted
from fixer.analysis.retained_walks import returned_only_for_numbers
from fixer.analysis.scopes import Scope, scope_nodes
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
