"""Whether a value surely requires grad: some input of it is a leaf that requires grad, or a
module built in this file and not frozen (``module.requires_grad_(False)``, or a loop setting
``p.requires_grad = False`` over its parameters), or a name computed from one of those. A module
passed in may be frozen: unknown. And whether an optimizer step may change an input of a value
(``may_be_stepped``)."""

from __future__ import annotations

import ast
import re

from fixer.analysis.bindings import module_names
from fixer.analysis.calls import is_optimizer_construction
from fixer.analysis.scopes import statement_index
from fixer.analysis.graph import GraphFacts, Kind
from fixer.analysis.names import dotted
from fixer.context import FileContext
from fixer.nodes import walk


def requires_grad_surely(ctx: FileContext, graph: GraphFacts, expr: ast.expr, at: ast.AST, depth: int) -> bool:
    """Some input of ``expr`` is a leaf that requires grad (named, or created in ``expr`` itself), or
    a module built in this file and not frozen, or a name computed from one of those (a module
    passed in may be frozen: unknown)."""
    for node in walk(expr):
        if isinstance(node, ast.Call) and graph.is_module(node.func):
            module = ctx.text(node.func)
            if module in module_names(ctx) and not _frozen(ctx, module):
                return True
        elif isinstance(node, ast.Call) and graph.kind(node, at) == Kind.LEAF:
            return True  # built right here: torch.tensor(..., requires_grad=True).view(-1, 1)
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


def may_be_stepped(ctx: FileContext, graph: GraphFacts, expr: ast.expr, at: ast.AST, depth: int = 3) -> bool:
    """An optimizer step may change an input of ``expr``: a module call in it, or an input that
    requires grad (a leaf, or a graph) that an optimizer construction of the file is given or whose
    origin is out of sight (a parameter, a call we cannot see into). False when every such input is
    created in the file (``torch.ones(n, requires_grad=True)``: collocation points) and no optimizer
    is given it."""
    given = _given_to_optimizers(ctx)
    for node in walk(expr):
        if isinstance(node, ast.Call) and graph.is_module(node.func):
            return True
        name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) else None
        if name is None or graph.kind(node, at) < Kind.LEAF:
            continue  # no input that requires grad (data, a function, a module of code)
        if name in given or name.partition(".")[0] in given:
            return True
        defs = graph.reaching(name, at)
        if not defs or depth == 0 or any(v is None or may_be_stepped(ctx, graph, v, s, depth - 1) for s, v in defs):
            return True
    return False


def _given_to_optimizers(ctx: FileContext) -> frozenset[str]:
    """The dotted names read in the arguments of the file's optimizer constructions."""

    def compute() -> frozenset[str]:
        return frozenset(
            name for a in statement_index(ctx).assigns if is_optimizer_construction(ctx, a.value)
            for n in walk(a.value) if isinstance(n, (ast.Name, ast.Attribute)) and (name := dotted(n))
        )

    return ctx.memo("given_to_optimizers", compute)
