"""The fake of a pair of GAN steps: the one assignment of a tensor that both steps read, and
the modules that made its graph.

``fake_definition(ctx, graph, scope, use)`` is the one assignment (statement, value) of the tensor
a ``Use`` reads (``fake``, ``out["fake"]``); ``same_definition`` asks whether another use reads the
same one (the fake is not regenerated between the steps). ``caller_fake`` answers for a caller
whose steps run in helpers: the modules that made ``fake`` (or ``self.fake``, assigned by the
class's methods; a constant stored there, ``self.fake = None`` in ``__init__``, is a placeholder that
holds no graph) as both steps see it; empty when that is not one known value.
"""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.gan_roles import producers
from fixer.analysis.gan_steps import Use, before, between, use_key
from fixer.analysis.graph import GraphFacts, facts
from fixer.analysis.names import dotted
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.analysis.shared_graph import reaching
from fixer.context import FileContext


def caller_fake(
    ctx: FileContext, scope: Scope, graph: GraphFacts, key: str, first: ast.stmt, second: ast.stmt,
    helpers: tuple[Optional[Scope], ...] = (),
) -> frozenset[str]:
    """The modules that made the graph ``key`` holds at both steps: one assignment of the caller
    reaching both, or, for ``self.fake`` the caller never assigns, every assignment of it in the
    class. Empty when unknown."""
    if "[" in key:
        return frozenset()
    if graph.assignments.get(key):
        defs = reaching(graph, key, first)
        if len(defs) != 1 or [id(s) for s, _ in reaching(graph, key, second)] != [id(defs[0][0])]:
            return frozenset()
        stmt, value = defs[0]
        return _made_by(ctx, graph, stmt, value)
    if scope.self_name is None or not key.startswith(scope.self_name + "."):
        return frozenset()
    made_by: set[str] = set()
    assigning = set()
    for method in scopes(ctx):
        if method.class_node is not scope.class_node or method.self_name is None or isinstance(method.node, ast.Module):
            continue
        own = method.self_name + key[len(scope.self_name) :]
        method_graph = facts(ctx, method)
        for stmt, value in method_graph.assignments.get(own, []):
            assigning.add(method.node.name)
            if isinstance(value, ast.Constant) and hasattr(stmt, "lineno"):
                continue  # a placeholder (``self.fake = None`` in ``__init__``) holds no graph
            modules = _made_by(ctx, method_graph, stmt, value) if hasattr(stmt, "lineno") else frozenset()
            if not modules:
                return frozenset()
            made_by |= {_as_caller(m, method, scope) for m in modules}
    # regenerated between the steps (`self.forward()` again) or inside a step's helper
    calls = [(n, scope) for n in scope_nodes(scope) if isinstance(n, ast.Call) and between(n, first, second)]
    calls += [(n, h) for h in helpers if h is not None for n in scope_nodes(h) if isinstance(n, ast.Call)]
    for node, owner in calls:
        if isinstance(node.func, ast.Attribute) and node.func.attr in assigning and dotted(node.func.value) == owner.self_name:
            return frozenset()
    return frozenset(made_by)


def _as_caller(name: str, method: Scope, scope: Scope) -> str:
    """``self.G`` as named in ``method`` -> as named in ``scope`` (their ``self`` may differ)."""
    head, dot, rest = name.partition(".")
    return scope.self_name + dot + rest if head == method.self_name and scope.self_name else name


def _made_by(ctx: FileContext, graph: GraphFacts, stmt: ast.AST, value: Optional[ast.expr]) -> frozenset[str]:
    if value is None or under_no_grad(ctx, stmt):
        return frozenset()
    return producers(ctx, graph, value, stmt)


def fake_definition(ctx: FileContext, graph: GraphFacts, scope: Scope, use: Use) -> Optional[tuple[ast.AST, ast.expr]]:
    """The one assignment of the fake tensor reaching ``use`` (statement, value), outside no_grad."""
    if isinstance(use.arg, ast.Subscript):
        found = item_definition(ctx, scope, use)
    else:
        defs = reaching(graph, use.key, use.stmt)
        found = defs[0] if len(defs) == 1 and before(defs[0][0], use.stmt) else None
    if found is None or found[1] is None or under_no_grad(ctx, found[0]):
        return None
    return found


def same_definition(ctx: FileContext, graph: GraphFacts, scope: Scope, use: Use, found: tuple[ast.AST, ast.expr]) -> bool:
    other = fake_definition(ctx, graph, scope, use)
    return other is not None and other[0] is found[0] and other[1] is found[1]


def item_definition(ctx: FileContext, scope: Scope, use: Use) -> Optional[tuple[ast.AST, ast.expr]]:
    """The latest ``base[key] = value`` or ``base = {key: value}`` before ``use``."""
    base, key = dotted(use.arg.value), use.arg.slice.value
    latest = None
    for node in scope_nodes(scope):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not before(node, use.stmt):
            continue
        target = node.targets[0]
        if isinstance(target, ast.Subscript) and dotted(target.value) == base and use_key(target) == use.key:
            latest = (node, node.value)
        elif dotted(target) == base:
            value = node.value
            items = dict(zip((k.value if isinstance(k, ast.Constant) else None for k in value.keys), value.values)) if isinstance(value, ast.Dict) else {}
            latest = (node, items[key]) if key in items else None
    return latest
