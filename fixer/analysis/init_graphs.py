"""Graphs built once in ``__init__`` and backpropagated through by every call of a training
method: ``self.data = self.proj(raw)`` in ``__init__``, ``loss = f(self.data); loss.backward()``
in ``step``, which the file calls in a loop. The first call frees the graph, the second fails.

``init_graphs(ctx, scope)`` lists, for a method that backpropagates on every call, the
(attribute, ``__init__`` assignment, backward calls) whose graph the calls walk. The attribute
must be assigned nowhere else in the class (no method rebuilds it), its value must carry a graph
that saved tensors from modules or leaves that surely require grad, and the method must be called
inside a loop of this file (one call would not fail)."""

from __future__ import annotations

import ast
import re
from typing import Callable, Optional

from fixer.analysis.calls import BackwardCall, backward_calls, frees_graph
from fixer.analysis.carried_flow import always_runs
from fixer.analysis.class_model import constructions, held_for_life
from fixer.analysis.graph import Kind, facts
from fixer.analysis.graph_reuse import derived_names, reaches
from fixer.analysis.loop_reach import class_key, local_names, read_fields
from fixer.analysis.names import dotted
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.protocol import call_loops
from fixer.analysis.scopes import LOOPS, NESTED, STATEMENT_LISTS, Scope, enclosing_loops, scope_nodes, scopes
from fixer.context import FileContext
from fixer.nodes import walk

InitGraph = tuple[str, ast.Assign, list[BackwardCall]]


def init_graphs(ctx: FileContext, scope: Scope, saving: Callable[[Scope, ast.Assign], bool]) -> list[InitGraph]:
    """``saving(init_scope, assignment)``: the assigned value's graph saved tensors from inputs
    that surely require grad (the rule's own test of a graph worth reporting)."""
    if not scope.self_name or getattr(scope.node, "name", "") == "__init__" or not backward_calls(ctx, scope):
        return []
    if not _called_in_a_loop(ctx, scope.node.name):
        return []
    calls = _every_call_backwards(ctx, scope)
    if not calls:
        return []
    init = next((s for s in scopes(ctx) if s.class_node is scope.class_node and getattr(s.node, "name", "") == "__init__"), None)
    if init is None or not init.self_name:
        return []
    found = []
    graph, nodes = facts(ctx, scope), scope_nodes(scope)
    for attr, stmt in sorted(_built_once(ctx, scope, init).items()):
        name = f"{scope.self_name}.{attr}"
        if attr not in _attributes(ctx, scope, calls):
            continue
        init_graph = facts(ctx, init)
        if under_no_grad(ctx, stmt) or init_graph.kind(stmt.value, stmt) != Kind.GRAPH or not saving(init, stmt):
            continue
        reaching = _reaching(ctx, scope, calls, attr, derived_names(ctx, graph, {name}, nodes))
        if reaching:
            found.append((name, stmt, reaching))
    return found


def given_graphs(ctx: FileContext, scope: Scope, saving: Callable[[Scope, ast.Assign], bool]) -> list[InitGraph]:
    """The same for a graph built at the top level of the module or a function and given to the
    class's one construction there, which keeps it for life (``y = t @ a``; ``Trainer(y)`` storing
    ``self.y = y``): (attribute, the assignment, backward calls)."""
    if not scope.self_name or getattr(scope.node, "name", "") == "__init__":
        return []
    life = {f: n for f, n in held_for_life(ctx).items() if "." not in n}
    if not life:
        return []  # (cheap first: most classes keep nothing given at their construction)
    every_call = _every_call_backwards(ctx, scope) if _called_in_a_loop(ctx, scope.node.name) else []
    fields = {f: n for f, n in life.items() if f.split(".", 1)[1] in _attributes(ctx, scope, every_call)}
    calls = every_call if fields else []
    sites = constructions(ctx, scope.class_node) if calls else None
    builder = _scope_of(ctx, sites[0]) if sites else None
    if builder is None:
        return []
    builder_graph, graph, nodes = facts(ctx, builder), facts(ctx, scope), scope_nodes(scope)
    found = []
    for field, given in sorted(fields.items()):
        defs = builder_graph.reaching(given, sites[0])
        stmt = defs[0][0] if len(defs) == 1 else None
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or ctx.parent(stmt) is not builder.node:
            continue
        if builder_graph.kind(stmt.value, stmt) != Kind.GRAPH or not saving(builder, stmt):
            continue
        name = f"{scope.self_name}.{field.split('.', 1)[1]}"
        reaching = _reaching(ctx, scope, calls, field.split(".", 1)[1], derived_names(ctx, graph, {name}, nodes))
        if reaching:
            found.append((name, stmt, reaching))
    return found


def _scope_of(ctx: FileContext, node: ast.AST) -> Optional[Scope]:
    """The module or function whose own code holds ``node`` (a construction may sit in its loops:
    every object it builds gets the same graph, built once at that scope's top level)."""
    parent = ctx.parent(node)
    while parent is not None and not isinstance(parent, (ast.Module, *NESTED)):
        parent = ctx.parent(parent)
    return next((s for s in scopes(ctx) if s.node is parent), None)


def _attributes(ctx: FileContext, scope: Scope, calls: list[BackwardCall]) -> set[str]:
    """The object's fields the method reads: itself, or through what its backward calls
    backpropagate (``loop_reach.read_fields``: a helper of any project file given ``self``)."""
    own = {n.attr for n in scope_nodes(scope) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and dotted(n.value) == scope.self_name}
    return own | {attr for call in calls for key, attr in _read_through(ctx, scope, call) if key == class_key(ctx, scope.class_node)}


def _reaching(ctx: FileContext, scope: Scope, calls: list[BackwardCall], attr: str, derived: set[str]) -> list[BackwardCall]:
    """The backward calls whose target the field's graph flows into: through the names derived
    from it here, or through the functions the target's value comes from."""
    return [c for c in calls if reaches(ctx, c, derived) or (class_key(ctx, scope.class_node), attr) in _read_through(ctx, scope, c)]


def _read_through(ctx: FileContext, scope: Scope, call: BackwardCall) -> set[tuple[int, str]]:
    return ctx.memo(("init_read_fields", id(call.node)), lambda: read_fields(ctx, scope, [call.target], local_names(scope)))


def _every_call_backwards(ctx: FileContext, scope: Scope) -> list[BackwardCall]:
    """The method's backward calls that run, and free their graph, on every call."""
    return [
        c for c in backward_calls(ctx, scope)
        if frees_graph(c) and c.kind != "autograd.grad" and not enclosing_loops(ctx, ctx.statement_of(c.node), scope)
        and always_runs(ctx, c.node, scope.node)
    ]


def _built_once(ctx: FileContext, scope: Scope, init: Scope) -> dict[str, ast.Assign]:
    """Attributes ``__init__`` assigns exactly once, unconditionally, and no other code of the
    class assigns (nor deletes)."""
    counts: dict[str, int] = {}
    first: dict[str, ast.Assign] = {}
    for other in scopes(ctx):
        if other.class_node is not scope.class_node or not other.self_name:
            continue
        for node in scope_nodes(other):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                for part in walk(target):
                    if isinstance(part, ast.Attribute) and dotted(part.value) == other.self_name:
                        counts[part.attr] = counts.get(part.attr, 0) + (1 if other is init else 2)
                        if other is init and isinstance(node, ast.Assign) and len(node.targets) == 1 and part is target:
                            first.setdefault(part.attr, node)
    return {a: s for a, s in first.items() if counts[a] == 1 and always_runs(ctx, s, init.node)}


def _called_in_a_loop(ctx: FileContext, name: str) -> bool:
    """The method ``name`` is called as ``x.<name>(...)`` inside a loop of this file; the text
    is asked first, so a file that never calls it is not walked for loops."""
    return name in _method_calls_in_text(ctx) and (name in _called_in_loops(ctx) or _called_in_a_step(ctx, name))


def _called_in_a_step(ctx: FileContext, name: str) -> bool:
    """``x.<name>(...)`` in a function that is one pass of loops (``protocol.call_loops``:
    ``for batch in ...: train_step(trainer)`` with ``trainer.step(...)`` in ``train_step``)."""
    return ctx.memo(("called_in_a_step", name), lambda: _any_step_calls(ctx, name))


def _any_step_calls(ctx: FileContext, name: str) -> bool:
    pattern = re.compile(r"\.\s*%s\s*\(" % re.escape(name))
    return any(
        not isinstance(scope.node, ast.Module) and ctx.mentions(scope.node, pattern)
        and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == name for n in scope_nodes(scope))
        and call_loops(ctx, scope) is not None
        for scope in scopes(ctx)
    )


METHOD_CALL = re.compile(r"\.\s*(\w+)\s*\(")


def _method_calls_in_text(ctx: FileContext) -> frozenset[str]:
    """Names the source text calls as ``.<name>(`` (one scan of the file)."""
    return ctx.memo("method_calls_in_text", lambda: frozenset(METHOD_CALL.findall(ctx.source)))


def _called_in_loops(ctx: FileContext) -> set[str]:
    """Method names called as ``x.<name>(...)`` inside a loop anywhere in this file (one walk)."""

    def compute() -> set[str]:
        found: set[str] = set()
        todo: list[ast.AST] = [ctx.tree]  # statements, down to the outermost loops (loops are statements)
        while todo:
            node = todo.pop()
            if isinstance(node, LOOPS):
                found.update(n.func.attr for n in walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute))
                continue
            for name in STATEMENT_LISTS:
                todo.extend(getattr(node, name, None) or ())
        return found

    return ctx.memo("called_in_loops", compute)
