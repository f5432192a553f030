"""What one iteration of a training loop runs and reads, through the objects it calls.

A loop's code reaches further than its body: ``model(x)`` runs the ``forward`` of the class that
``model`` holds an instance of, ``model.nll()`` runs that method, and inside a method
``self.kernel(x, x)`` runs the ``forward`` of the module ``__init__`` stored in ``self.kernel``.
Only this file's classes are followed, and only objects made once: a name the loop rebinds is a
new object in every iteration and is not followed, nor a field any code other than ``__init__``
stores.

``read_fields(ctx, scope, exprs, rebound)``: the fields (class, attribute) whose values flow into
``exprs`` through local names, the return values of the methods they call and the modules their
objects hold. ``methods_run(ctx, scope, loop)``: the methods the loop's body runs, at any depth.
``stored_from_outside(ctx)``: attributes some code stores on an object other than its own
``self`` (``model.scale = ...``): such a field's lifetime is not its class's to decide."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.class_model import attribute_writes, class_methods
from fixer.analysis.graph import facts
from fixer.analysis.graph_reuse import assigned_names
from fixer.analysis.instances import instance_class
from fixer.analysis.names import dotted
from fixer.analysis.project import called_function
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.context import FileContext
from fixer.nodes import walk

MAX_CALL_DEPTH = 4  # methods followed from the loop into the objects it calls

Field = tuple[int, str]  # (id of the class node, attribute)


def rebound_in(loop: ast.AST) -> set[str]:
    """Names the loop binds (its target and every assignment in it)."""
    return {name for node in walk(loop) for name in assigned_names(node)}


def read_fields(ctx: FileContext, scope: Scope, exprs: list[ast.expr], rebound: set[str],
                depth: int = MAX_CALL_DEPTH, seen: frozenset = frozenset()) -> set[Field]:
    graph = facts(ctx, scope)
    found: set[Field] = set()
    todo, done = list(exprs), set()
    while todo:
        expr = todo.pop()
        if id(expr) in done:
            continue
        done.add(id(expr))
        for node in walk(expr):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and scope.self_name and dotted(node.value) == scope.self_name:
                found.add((id(scope.class_node), node.attr))
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                todo.extend(value for _, value in graph.assignments.get(node.id, []) if value is not None)
            elif isinstance(node, ast.Call) and depth > 0:
                callee = callee_method(ctx, scope, node.func, rebound)
                if callee is not None and id(callee.node) not in seen:
                    returns = [n.value for n in scope_nodes(callee) if isinstance(n, ast.Return) and n.value is not None]
                    found |= read_fields(ctx, callee, returns, set(), depth - 1, seen | {id(callee.node)})
    return found


def methods_run(ctx: FileContext, scope: Scope, loop: ast.AST) -> list[Scope]:
    """The methods of this file's classes that the loop's body calls, directly or through them."""
    rebound = rebound_in(loop)
    found: dict[int, Scope] = {}
    todo = [(scope, [n for n in walk(loop) if isinstance(n, ast.Call)], rebound, MAX_CALL_DEPTH)]
    while todo:
        where, calls, names, depth = todo.pop()
        for call in calls:
            callee = callee_method(ctx, where, call.func, names)
            if callee is None or id(callee.node) in found or callee.class_node is None:
                continue
            found[id(callee.node)] = callee
            if depth > 1:
                todo.append((callee, [n for n in scope_nodes(callee) if isinstance(n, ast.Call)], set(), depth - 1))
    return list(found.values())


def callee_method(ctx: FileContext, scope: Scope, func: ast.expr, rebound: set[str]) -> Optional[Scope]:
    """The method a call runs: ``self.method``, ``obj.method`` or ``obj(...)`` (its ``forward``) for
    an object of one of this file's classes, ``self.sub(...)`` for a module the object holds."""
    name = dotted(func) or ""
    if name.partition(".")[0] in rebound:
        return None
    held = _held_class(ctx, scope, func)
    if held is not None:
        return class_methods(ctx, held).get("forward")
    if isinstance(func, ast.Name):
        values = facts(ctx, scope).assignments.get(func.id, [])
        classes = {id(c): c for _, v in values if (c := instance_class(ctx, v))}
        if len(classes) == 1 and len(values) == 1:
            return class_methods(ctx, next(iter(classes.values()))).get("forward")
    return called_function(ctx, scope, func, imported=False)


def _held_class(ctx: FileContext, scope: Scope, func: ast.expr) -> Optional[ast.ClassDef]:
    """The class of ``self.sub`` when ``__init__`` alone stores ``Cls(...)`` of this file into it."""
    if not (isinstance(func, ast.Attribute) and scope.self_name and dotted(func.value) == scope.self_name):
        return None
    writes = attribute_writes(ctx, scope.class_node).get(func.attr, [])
    if len(writes) != 1 or writes[0].method.node.name != "__init__" or func.attr in stored_from_outside(ctx):
        return None
    return instance_class(ctx, writes[0].value)


def stored_from_outside(ctx: FileContext) -> frozenset[str]:
    """Attributes stored as ``obj.<attr> = ...`` on anything but a method's own object."""

    def compute() -> frozenset[str]:
        selves = {id(s.node): s.self_name for s in scopes(ctx)}
        found = set()
        for scope in scopes(ctx):
            for node in scope_nodes(scope):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
                for target in targets:
                    for part in walk(target):
                        if isinstance(part, ast.Attribute) and isinstance(part.ctx, ast.Store) and not (
                            isinstance(part.value, ast.Name) and part.value.id == selves.get(id(scope.node))
                        ):
                            found.add(part.attr)
        return frozenset(found)

    return ctx.memo("stored_from_outside", compute)
