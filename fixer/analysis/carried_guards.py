"""Facts that end a carried-value suspicion before it is reported (``carried.py``).

- ``leaf_only``: a requires-grad leaf passed only through operations that save no tensors
  (``x.clone().requires_grad_().to(dev)``) has nothing a backward frees; reusing it is fine.
- ``invariant_definitions``: a name unbound before the loop, defined before the read only under
  ``if`` tests that read nothing the loop rebinds (``if mode == "a": out = ... elif ...``): every
  pass takes the same arm, so no pass can see an earlier pass's value (if no arm matched, the first
  pass would raise ``NameError``). The loop's pass filter (``passes.py``) guards the read too.
- ``inplace_alias_cut``: ``for s in state: s.detach_()`` before the read detaches every element of
  ``state`` in place. A dropped ``s.detach()`` is a no-op and is no cut.
"""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.carried_flow import inside, position, statement_effect
from fixer.analysis.graph import GraphFacts, Kind
from fixer.analysis.names import dotted, qualified
from fixer.analysis.passes import is_pass_filter
from fixer.analysis.shared_graph import NON_SAVING
from fixer.context import FileContext
from fixer.nodes import child_nodes, walk

MAX_DEPTH = 6
UNSURE_GUARDS = (ast.While, ast.For, ast.AsyncFor, ast.Try, ast.ExceptHandler, getattr(ast, "Match", ast.If))


def leaf_only(ctx: FileContext, graph: GraphFacts, expr: Optional[ast.expr], at: ast.AST, depth: int = 0) -> bool:
    """``expr``'s history is a requires-grad leaf and operations that save no tensors."""
    if expr is None or depth > MAX_DEPTH:
        return False
    kind = graph.kind(expr, at)
    if kind == Kind.LEAF:
        return True
    if kind != Kind.GRAPH:
        return False
    if isinstance(expr, (ast.Name, ast.Attribute)) and dotted(expr):
        defs = graph.reaching(dotted(expr), at)
        return bool(defs) and all(_no_saved(ctx, graph, v, s, depth + 1) for s, v in defs)
    if isinstance(expr, ast.Call):
        func = expr.func
        method = func.attr if isinstance(func, ast.Attribute) else None
        name = qualified(ctx, func) or ""
        args = [*expr.args, *(k.value for k in expr.keywords)]
        if name.startswith("torch.") and name.rsplit(".", 1)[-1] in NON_SAVING:
            return all(_no_saved(ctx, graph, a, at, depth + 1) for a in args)
        if method in NON_SAVING:
            return leaf_only(ctx, graph, func.value, at, depth + 1) and all(_no_saved(ctx, graph, a, at, depth + 1) for a in args)
        return False
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return _no_saved(ctx, graph, expr.left, at, depth + 1) and _no_saved(ctx, graph, expr.right, at, depth + 1)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return leaf_only(ctx, graph, expr.operand, at, depth + 1)
    if isinstance(expr, (ast.Tuple, ast.List)):
        return all(_no_saved(ctx, graph, e, at, depth + 1) for e in expr.elts)
    if isinstance(expr, ast.Starred):
        return leaf_only(ctx, graph, expr.value, at, depth + 1)
    return False


def _no_saved(ctx: FileContext, graph: GraphFacts, expr: Optional[ast.expr], at: ast.AST, depth: int) -> bool:
    """No graph, or a leaf-only one (an unknown value gives no fact, never a graph)."""
    if expr is None:
        return False
    kind = graph.kind(expr, at)
    return kind != Kind.GRAPH or leaf_only(ctx, graph, expr, at, depth)


def invariant_definitions(ctx: FileContext, graph: GraphFacts, loop: ast.AST, defs, read: ast.AST) -> bool:
    """Every definition of the name in ``loop`` precedes ``read`` and sits only under ``if`` tests
    that read nothing ``loop`` rebinds (its target, a name or attribute stored in its body), or in
    the body of an inner ``for``: the name is unbound before ``loop``, so the program relies on
    that loop running (an empty one would fail on the first pass)."""
    rebound = _rebound(graph, ctx, loop)
    for stmt, _ in defs:
        if not hasattr(stmt, "lineno") or position(stmt) >= position(read):
            return False
        child = stmt
        for parent in ctx.ancestors(stmt):
            if parent is loop:
                break
            inner_body = isinstance(parent, (ast.For, ast.AsyncFor)) and any(child is s for s in parent.body)
            if isinstance(parent, UNSURE_GUARDS) and not isinstance(parent, ast.If) and not inner_body:
                return False  # a while loop or a handler decides: not a fixed choice
            if isinstance(parent, ast.If) and _reads_any(parent.test, rebound) and not is_pass_filter(ctx, parent):
                return False
            child = parent
    return True


def _rebound(graph: GraphFacts, ctx: FileContext, loop: ast.AST) -> set[str]:
    names = {n for n, defs in graph.assignments.items() if any(s is loop or inside(ctx, s, loop) for s, _ in defs)}
    for node in walk(loop):
        if isinstance(node, ast.stmt):
            names |= statement_effect(node)[0]
    return names


def _reads_any(test: ast.expr, rebound: set[str]) -> bool:
    """``test`` reads a rebound name, an attribute of one, or a prefix of a rebound attribute."""
    parents = {id(c): n for n in walk(test) for c in child_nodes(n)}
    for node in walk(test):
        if not isinstance(node, (ast.Name, ast.Attribute)) or isinstance(parents.get(id(node)), ast.Attribute):
            continue  # only the longest dotted read (``self.mode``, not ``self``)
        name = dotted(node)
        if name is None:
            if isinstance(node, ast.Attribute):
                continue  # attribute of a call result: its names are walked too
        elif any(name == r or name.startswith(r + ".") or r.startswith(name + ".") for r in rebound):
            return True
    return False


def inplace_alias_cut(ctx: FileContext, loop: ast.AST, name: str, read: ast.AST) -> bool:
    """A ``for alias in name:`` inside ``loop`` before ``read`` whose body calls ``alias.detach_()``."""
    for node in walk(loop):
        if not isinstance(node, (ast.For, ast.AsyncFor)) or dotted(node.iter) != name or position(node) >= position(read):
            continue
        if not isinstance(node.target, ast.Name):
            continue
        alias = node.target.id
        for inner in walk(node):
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "detach_":
                if dotted(inner.func.value) == alias:
                    return True
    return False
