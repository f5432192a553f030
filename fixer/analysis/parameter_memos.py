"""Values a method memoizes on its object although they are graphs of the object's parameters.

A *parameter memo* is a store ``self.table = v`` in a method (not ``__init__``) where ``v`` is
computed only from parameters of the object (fields ``__init__`` stores an ``nn.Parameter`` into,
not frozen by ``requires_grad=False``), constants and tensors made without a graph
(``torch.arange(n)``): no argument's values and no other field flow into it. The method reads
the memo before storing it (``if self.table is not None: return self.table``), or it is a helper
that only fills it, called only by methods that read it first (``if self._weight is None:
self.refresh()``), so a later call returns the tensor an earlier call built; ``__init__`` is the
only other code storing the field.

A loop *walks* it when a backward that frees its graph runs in every iteration, the loop runs the
method (``loop_reach.methods_run``) and backpropagates a tensor computed from the field
(``loop_reach.read_fields``): the second iteration's backward walks the graph of the first
iteration's memo, which the first backward freed (and the memo never follows the updates).

``walked_memos(ctx)`` lists (class, field, method, store, parameters it reads, loop, call)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

from fixer.analysis.bindings import imported_names
from fixer.analysis.calls import BackwardCall
from fixer.analysis.class_model import attribute_writes, class_methods
from fixer.analysis.importers import class_importers
from fixer.analysis.graph import PARAMETER_CLASSES, Kind, facts
from fixer.analysis.loop_reach import class_key, loop_file, stored_from_outside, walking_steps
from fixer.analysis.names import dotted, qualified
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.scopes import Scope, scope_nodes, statement_index
from fixer.context import FileContext
from fixer.nodes import child_nodes, walk

PARAMETER = PARAMETER_CLASSES


@dataclass(frozen=True)
class WalkedMemo:
    cls: ast.ClassDef
    attr: str
    method: Scope
    store: ast.Assign
    parameters: tuple[str, ...]  # the parameter fields the memo is computed from
    loop: ast.AST
    call: BackwardCall
    loop_in: str = ""  # the file of the loop, when it is not the class's


def walked_memos(ctx: FileContext) -> list[WalkedMemo]:
    def compute() -> list[WalkedMemo]:
        memos = {}
        for cls in statement_index(ctx).classes:
            for attr, (method, store, params) in _memos(ctx, cls).items():
                memos[(class_key(ctx, cls), attr)] = (cls, method, store, params)
        if not memos:
            return []
        steps = walking_steps(ctx, {key: method for key, (_, method, _, _) in memos.items()})
        found = []
        for key, step in steps.items():
            cls, method, store, params = memos[key]
            found.append(WalkedMemo(cls, key[1], method, store, params, step.loop, step.call, loop_file(ctx, step)))
        return found

    return ctx.memo("walked_memos", compute)


def _memos(ctx: FileContext, cls: ast.ClassDef) -> dict[str, tuple[Scope, ast.Assign, tuple[str, ...]]]:
    parameters = _parameter_fields(ctx, cls)
    if not parameters:
        return {}
    found = {}
    for attr, writes in attribute_writes(ctx, cls).items():
        later = [w for w in writes if w.method.node.name != "__init__"]
        if len(later) != 1 or attr in stored_from_outside(ctx) or attr in parameters:
            continue
        write = later[0]
        stmt = write.stmt
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or write.no_grad or under_no_grad(ctx, stmt):
            continue
        if not _read_before(write.method, attr, stmt) and not _filled_on_demand(ctx, cls, write.method, attr):
            continue
        graph = facts(ctx, write.method)
        inputs = _graph_inputs(ctx, write.method, graph, stmt.value, stmt, set())
        if inputs is None or not inputs:
            continue
        fields = {name.split(".", 1)[1] for name in inputs}
        if fields <= parameters and not _guarded_by_training(ctx, write.method, stmt):
            found[attr] = (write.method, stmt, tuple(sorted(f"{write.method.self_name}.{f}" for f in fields)))
    return found


def _parameter_fields(ctx: FileContext, cls: ast.ClassDef) -> set[str]:
    """Fields ``__init__`` stores an ``nn.Parameter`` into, not frozen (``requires_grad=False``)."""
    found = set()
    for attr, writes in attribute_writes(ctx, cls).items():
        for write in writes:
            value = write.value
            if write.method.node.name == "__init__" and isinstance(value, ast.Call) and qualified(ctx, value.func) in PARAMETER:
                frozen = any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and not k.value.value for k in value.keywords)
                if not frozen:
                    found.add(attr)
    return found


def _guarded_by_training(ctx: FileContext, method: Scope, store: ast.Assign) -> bool:
    """The store sits under a test of gradient recording: ``if not self.w.requires_grad:``,
    ``if not torch.is_grad_enabled():`` (the memo is kept only while nothing trains)."""
    for parent in ctx.ancestors(store):
        if parent is method.node:
            return False
        if isinstance(parent, (ast.If, ast.IfExp)) and any(
            isinstance(n, ast.Attribute) and n.attr == "requires_grad"
            or isinstance(n, ast.Call) and qualified(ctx, n.func) == "torch.is_grad_enabled"
            for n in walk(parent.test)
        ):
            return True
    return False


def _read_before(method: Scope, attr: str, store: ast.Assign) -> bool:
    """The method reads ``self.<attr>`` before the store (it may return an earlier call's value)."""
    return any(_position(n) < _position(store) for n in _reads(method, attr))


def _filled_on_demand(ctx: FileContext, cls: ast.ClassDef, helper: Scope, attr: str) -> bool:
    """A helper that only stores the memo (``def refresh(self): self._weight = ...``) whose every
    call is a ``self.refresh()`` of another method of the class after that method reads the field
    (``if self._weight is None: self.refresh()``); nothing else in the project may call it."""
    name = helper.node.name
    if class_importers(ctx, cls):
        return False  # another file may call it
    calls = _own_calls(ctx, helper)
    mentions = [n for n in walk(ctx.tree) if isinstance(n, ast.Attribute) and n.attr == name]
    if not calls or len(mentions) != len(calls):
        return False  # called from elsewhere, or passed on as a bound method
    return all(any(_position(r) < _position(c) for r in _reads(m, attr)) for m, c in calls)


def _own_calls(ctx: FileContext, method: Scope) -> list[tuple[Scope, ast.Call]]:
    """(caller, call) for each ``self.<method>(...)`` in the other methods of its class."""
    name = method.node.name
    return [(m, n) for m in class_methods(ctx, method.class_node).values() if m is not method for n in scope_nodes(m)
            if isinstance(n, ast.Call) and dotted(n.func) == f"{m.self_name}.{name}"]


def read_after(ctx: FileContext, method: Scope, attr: str, store: ast.Assign) -> bool:
    """The method reads ``self.<attr>`` after the store, or a method calling it (a helper that
    fills the memo on demand) reads it after the call."""
    if any(_position(n) > (store.end_lineno, store.end_col_offset) for n in _reads(method, attr)):
        return True
    callers = _own_calls(ctx, method)
    return any(_position(r) > _position(c) for m, c in callers for r in _reads(m, attr))


def _reads(method: Scope, attr: str) -> list[ast.Attribute]:
    name = f"{method.self_name}.{attr}"
    return [n for n in scope_nodes(method) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and dotted(n) == name]


def _position(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset


def _names_function(ctx: FileContext, func: ast.expr) -> bool:
    """``func`` names a function, not a method of a value: a bare name or an attribute of an
    imported module (``torch.einsum``, ``F.softplus``)."""
    root = func
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(func, ast.Name) or isinstance(root, ast.Name) and root.id in imported_names(ctx)


def _graph_inputs(ctx: FileContext, method: Scope, graph, expr: ast.AST, at: ast.AST, seen: set) -> Optional[set[str]]:
    """The object's fields a graph can flow from into ``expr``; None when an argument, a global
    or anything the method cannot see may carry one. Sub-expressions without a graph (by the
    graph facts: ``torch.arange(n)``, numbers) are not followed."""
    if isinstance(expr, ast.expr) and graph.kind(expr, at) == Kind.NONE:
        return set()
    name = dotted(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else None
    if name is not None and name.startswith(f"{method.self_name}.") and name.count(".") == 1:
        return {name}
    if isinstance(expr, ast.Name):
        defs = graph.reaching(expr.id, at)
        if not defs or expr.id in seen or any(value is None for _, value in defs):
            return None
        found: set[str] = set()
        for stmt, value in defs:
            inner = _graph_inputs(ctx, method, graph, value, stmt, seen | {expr.id})
            if inner is None:
                return None
            found |= inner
        return found
    if isinstance(expr, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Starred)):
        return None
    found = set()
    for child in child_nodes(expr):
        if isinstance(expr, ast.Call) and child is expr.func:
            if _names_function(ctx, expr.func):
                continue  # ``torch.einsum(...)``: the function, not a value
            child = expr.func.value  # ``t.float()``: the receiver
        if isinstance(child, (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)):
            continue
        if isinstance(child, ast.keyword):
            child = child.value
        inner = _graph_inputs(ctx, method, graph, child, at, seen)
        if inner is None:
            return None
        found |= inner
    return found
