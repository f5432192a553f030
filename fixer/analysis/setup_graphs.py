"""Graphs built once when an object is set up and walked by every training iteration.

A *setup graph* is a field an object's ``__init__`` stores exactly once, unconditionally and with
gradient recording on, whose value is a graph that saved tensors from a leaf that requires grad
(``self.scale = torch.exp(nn.Parameter(torch.zeros(1)))``, ``self.gram = self.w @ self.w.t()``),
and that nothing else assigns: no other statement of the class, no ``obj.<field> = ...`` anywhere
in the file. It lives as long as the object, so its graph is built once.

A loop *walks* it when a backward that frees its graph runs in every iteration and the tensor it
backpropagates is computed from the field: ``loss.backward()`` where ``loss`` comes, through
local names, the return values of the methods it calls (``model.nll()``, ``self.kernel(x, x)``
running ``forward``) and the modules the object holds (a field ``__init__`` alone stores a
construction of one of this file's classes into), from a read of the field. An object rebound
inside the loop is a new object every iteration and is not followed. The first iteration's
backward frees the setup graph, the second raises.

``walked_setup_graphs(ctx)`` lists (class, field, store, loop, backward call), one per field."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

from fixer.analysis.calls import BackwardCall, backward_calls
from fixer.analysis.class_model import Write, attribute_writes, class_methods
from fixer.analysis.graph import Kind, facts
from fixer.analysis.graph_reuse import assigned_names, frees_graph, innermost_loop, repeats_per_iteration
from fixer.analysis.instances import instance_class
from fixer.analysis.names import dotted
from fixer.analysis.project import called_function
from fixer.analysis.scopes import Scope, scope_nodes, scopes, statement_index
from fixer.analysis.shared_graph import saves_tensors
from fixer.context import FileContext
from fixer.nodes import walk

MAX_CALL_DEPTH = 4  # methods followed from the loop's loss into the objects it calls

Field = tuple[int, str]  # (id of the class node, attribute)


@dataclass(frozen=True)
class WalkedSetupGraph:
    cls: ast.ClassDef
    attr: str
    store: Write
    loop: ast.AST
    call: BackwardCall


def setup_graphs(ctx: FileContext, cls: ast.ClassDef) -> dict[str, Write]:
    """The class's setup graphs: attribute -> its one store in ``__init__``."""

    def compute() -> dict[str, Write]:
        found = {}
        for attr, writes in attribute_writes(ctx, cls).items():
            write = writes[0]
            if len(writes) != 1 or write.method.node.name != "__init__" or not write.every_call or write.no_grad:
                continue
            if not isinstance(write.stmt, ast.Assign) or len(write.stmt.targets) != 1 or attr in _stored_from_outside(ctx):
                continue
            if _built_from_trainable_leaf(ctx, write.method, write.stmt):
                found[attr] = write
        return found

    return ctx.memo(("setup_graphs", id(cls)), compute)


def walked_setup_graphs(ctx: FileContext) -> list[WalkedSetupGraph]:
    def compute() -> list[WalkedSetupGraph]:
        classes = {id(c): c for c in statement_index(ctx).classes}
        fields = {(key, attr): write for key, cls in classes.items() for attr, write in setup_graphs(ctx, cls).items()}
        if not fields:
            return []
        found: dict[Field, WalkedSetupGraph] = {}
        for scope in scopes(ctx):
            for call in backward_calls(ctx, scope):
                loop = innermost_loop(ctx, call.node, scope.node)
                if loop is None or not frees_graph(call) or not repeats_per_iteration(ctx, call, loop):
                    continue
                rebound = {name for node in walk(loop) for name in assigned_names(node)}
                for field in sorted(_read_fields(ctx, scope, [call.target], rebound, MAX_CALL_DEPTH, set()) & fields.keys()):
                    found.setdefault(field, WalkedSetupGraph(classes[field[0]], field[1], fields[field], loop, call))
        return list(found.values())

    return ctx.memo("walked_setup_graphs", compute)


def _built_from_trainable_leaf(ctx: FileContext, init: Scope, stmt: ast.Assign) -> bool:
    graph = facts(ctx, init)
    if graph.kind(stmt.value, stmt) != Kind.GRAPH or not saves_tensors(ctx, init, stmt.value):
        return False
    return any(isinstance(n, ast.expr) and graph.kind(n, stmt) == Kind.LEAF for n in walk(stmt.value))


def _stored_from_outside(ctx: FileContext) -> frozenset[str]:
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


def _read_fields(ctx: FileContext, scope: Scope, exprs: list[ast.expr], rebound: set[str], depth: int, seen: set) -> set[Field]:
    """Fields of objects whose values flow into ``exprs`` in ``scope``: through local names, calls
    of methods (their return values) and the modules an object holds. Names in ``rebound`` are
    objects made anew in each iteration: not followed into."""
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
                callee = _callee(ctx, scope, node.func, rebound)
                if callee is not None and id(callee.node) not in seen:
                    returns = [n.value for n in scope_nodes(callee) if isinstance(n, ast.Return) and n.value is not None]
                    found |= _read_fields(ctx, callee, returns, set(), depth - 1, seen | {id(callee.node)})
    return found


def _callee(ctx: FileContext, scope: Scope, func: ast.expr, rebound: set[str]) -> Optional[Scope]:
    """The method a call runs: ``self.method``, ``obj.method`` or ``obj(...)`` (its ``forward``) for
    an object of one of this file's classes, ``self.sub(...)`` for a module the object holds."""
    name = dotted(func) or ""
    if name.partition(".")[0] in rebound:
        return None
    held = _held_class(ctx, scope, func)
    if held is not None:
        return class_methods(ctx, held).get("forward")
    if isinstance(func, ast.Name):
        classes = {id(c): c for _, v in facts(ctx, scope).assignments.get(func.id, []) if (c := instance_class(ctx, v))}
        if len(classes) == 1 and len(facts(ctx, scope).assignments.get(func.id, [])) == 1:
            return class_methods(ctx, next(iter(classes.values()))).get("forward")
    return called_function(ctx, scope, func, imported=False)


def _held_class(ctx: FileContext, scope: Scope, func: ast.expr) -> Optional[ast.ClassDef]:
    """The class of ``self.sub`` when ``__init__`` alone stores ``Cls(...)`` of this file into it."""
    if not (isinstance(func, ast.Attribute) and scope.self_name and dotted(func.value) == scope.self_name):
        return None
    writes = attribute_writes(ctx, scope.class_node).get(func.attr, [])
    if len(writes) != 1 or writes[0].method.node.name != "__init__" or func.attr in _stored_from_outside(ctx):
        return None
    return instance_class(ctx, writes[0].value)
