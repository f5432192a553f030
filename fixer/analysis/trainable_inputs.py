"""Whether a value surely requires grad: some input of it is a leaf that requires grad, or a
module built in this file and not frozen (``module.requires_grad_(False)``, or a loop setting
``p.requires_grad = False`` over its parameters), or a name computed from one of those. A module
passed in may be frozen: unknown."""

from __future__ import annotations

import ast
import re

from fixer.analysis.bindings import module_names
from fixer.analysis.graph import GraphFacts, Kind
from fixer.analysis.names import dotted
from fixer.context import FileContext
from fixer.nodes import walk


def requires_grad_surely(ctx: FileContext, graph: GraphFacts, expr: ast.expr, at: ast.AST, depth: int) -> bool:
    """Some input of ``expr`` is a leaf that requires grad, or a module built in this file and not
    frozen, or a name computed from one of those (a module passed in may be frozen: unknown)."""
    for node in walk(expr):
        if isinstance(node, ast.Call) and graph.is_module(node.func):
            module = ctx.text(node.func)
            if module in module_names(ctx) and not _frozen(ctx, module):
                return True
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and dotted(node):
            kind = graph.kind(node, at)
            if kind == Kind.LEAF:
                return True
            if kind == Kind.GRAPH and depth > 0:
                defs = graph.reaching(dotted(node), at)
                if any(v is not None and requires_grad_surely(ctx, graph, v, s, depth - 1) for s, v in defs):
                    return True
    return False


def _frozen(ctx: FileContext, module: str) -> bool:
    name = re.escape(module)
    pattern = (
        rf"{name}\.requires_grad_\(\s*False|{name}\.eval\(\)\.requires_grad_\(\s*False"
        rf"|for\s+(\w+)\s+in\s+{name}\.parameters\(\)\s*:\s*\n?\s*\1\.requires_grad(_\(\s*False|\s*=\s*False)"
    )
    return re.search(pattern, ctx.source) is not None
