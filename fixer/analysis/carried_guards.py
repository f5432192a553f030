"""Facts that end a carried-value suspicion before it is reported (``carried.py``).

- ``leaf_only``: a requires-grad leaf passed only through operations that save no tensors
  (``x.clone().requires_grad_().to(dev)``) has nothing a backward frees; reusing it is fine.
- ``invariant_definitions``: a name unbound before the loop, defined before the read only under
  ``if`` tests that read nothing the loop rebinds (``if mode == "a": out = ... elif ...``): every
  pass takes the same arm, so no pass can see an earlier pass's value (if no arm matched, the first
  pass would raise ``NameError``). The loop's pass filter (``passes.py``) guards the read too.
- ``inplace_alias_cut``: ``for s in state: s.detach_()`` before the read detaches every element of
  ``state`` in place. A dropped ``s.detach()`` is a no-op and is no cut.
- ``cut_somewhere``: the author already cuts the value's history (``detach``/``repackage_hidden``
  in a statement that mentions it, or a rebuild from its ``.data``); ``reset_by_call_before``: a
  method that reassigns it runs before the read.
- ``carries_graph``: whether a stored value carries a graph a backward frees at all.
"""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.carried_flow import always_runs, contains, inside, names_in, position, statement_effect
from fixer.analysis.carried_shape import class_init_values, returned_elements
from fixer.analysis.module_forwards import forward_scope
from fixer.analysis.graph import NON_SAVING, GraphFacts, Kind, facts
from fixer.analysis.names import dotted, last_name, qualified
from fixer.analysis.passes import is_pass_filter
from fixer.analysis.scopes import RETURNS, Scope, nodes_of, scope_nodes, scopes
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


CUTS = ("detach", "repackage", "truncate")


def reset_by_call_before(ctx, scope, it, name, read) -> bool:
    """``self.reset_state()`` before the read, where that method assigns ``name``."""
    if not name.startswith(f"{scope.self_name}."):
        return False
    for node in walk(it.node):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and position(node) < position(read)):
            continue
        if dotted(node.func.value) == scope.self_name and always_runs(ctx, node, it.node):
            if name in class_init_values(ctx, scope, node.func.attr):
                return True
    return False


def cut_somewhere(ctx: FileContext, scope: Scope, graph: GraphFacts, name: str) -> bool:
    """The author already cuts this value's history somewhere: a ``detach``/``repackage_hidden``
    call in a statement that mentions it, or an assignment from itself that carries no graph."""
    places = [scope]
    if scope.self_name and name.startswith(f"{scope.self_name}."):
        places += [s for s in scopes(ctx) if s.class_node is scope.class_node and s is not scope]
    attr = name.split(".", 1)[1] if "." in name else name
    for place in places:
        target = name if place is scope else f"{place.self_name}.{attr}"
        for node in scope_nodes(place):
            if isinstance(node, ast.Call) and any(cut in (last_name(node.func) or "").lower() for cut in CUTS):
                if target in names_in(ctx.statement_of(node)):
                    return True
    for stmt, value in graph.assignments.get(name, []):
        if value is not None and name in names_in(value) and graph.kind(value, stmt) == Kind.NONE:
            return True
        if value is not None and _only_data_of(value, name):
            return True
    return False


def _only_data_of(value: ast.expr, name: str) -> bool:
    """``tuple([each.data for each in h])``, ``Variable(h.data)``: the value is rebuilt from the
    carried one, every use of it (or of a comprehension variable running over it) read through
    ``.data`` or ``.detach()``: its history is cut."""
    parents = {id(child): node for node in walk(value) for child in child_nodes(node)}
    aliases = {name}
    iters = []
    for node in walk(value):
        if isinstance(node, ast.comprehension) and name in names_in(node.iter) and isinstance(node.target, ast.Name):
            aliases.add(node.target.id)
            iters.append(node.iter)
    uses = 0
    for node in walk(value):
        if not (isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and dotted(node) in aliases):
            continue
        if any(contains(it, node) for it in iters) and dotted(node) == name:
            continue  # the iterable itself: its elements are what is used
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.attr in ("data", "detach"):
            uses += 1
            continue
        return False
    return uses > 0


def carries_graph(ctx: FileContext, graph: GraphFacts, value: ast.expr, at: ast.AST) -> bool:
    """``graph.carries_graph``, looking into the ``forward`` of a module class of this file: an
    output it returns detached (or passes through unchanged) carries no graph of this call. A leaf
    passed only through operations that save no tensors has nothing a backward frees."""
    if graph.kind(value, at) != Kind.GRAPH or leaf_only(ctx, graph, value, at):
        return False
    call, index = value, None
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant) and isinstance(value.slice.value, int):
        call, index = value.value, value.slice.value
    if not isinstance(call, ast.Call):
        return True
    forward = forward_scope(ctx, call.func)
    if forward is None:
        return True
    callee = facts(forward.ctx or ctx, forward)
    if index is None:
        returns = [(n, n.value) for n in nodes_of(forward, RETURNS) if isinstance(n, ast.Return) and n.value is not None]
    else:
        returns = returned_elements(forward, index) or []
    return not returns or all(callee.kind(element, ret) == Kind.GRAPH for ret, element in returns)
