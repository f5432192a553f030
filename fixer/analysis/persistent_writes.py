"""Graph-carrying values written in place into a tensor that outlives the training iteration.

A *persistent tensor* is a field made once: ``__init__`` stores a new tensor in it (a torch
creation call, or ``self.register_buffer("name", ...)``), and every other store of the class
rebinds it from itself without cutting it (``self.cache = self.cache.to(x)`` keeps its history);
no code stores it from outside the class, nor detaches it in place.

A *history write* is an in-place write into it (``self.bank[i] = v``, ``self.bank[i] += v``,
``self.bank.copy_(v)``) of a value that carries a graph: by the graph facts, or computed from a
parameter of the method to which every call of the method in the file passes a graph. The tensor
records the write on top of its previous version, so each iteration's write chains onto the
history of every earlier one. A write a module makes only in evaluation mode (``if not
self.training:``, a key/value cache for generation) is not one: training never runs it.

``walked_histories(ctx)`` lists those a training loop walks: a loop whose every iteration runs a
backward that frees its graph, runs the writing method (``loop_reach.methods_run``), and
backpropagates a tensor computed from the field (``loop_reach.read_fields``). The second
iteration's backward reaches the first iteration's write, whose graph the first backward freed."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Optional

from fixer.analysis.calls import BackwardCall
from fixer.analysis.class_model import Write, attribute_writes, class_methods
from fixer.analysis.graph import Kind, facts
from fixer.analysis.graph_reuse import derived_names, flowing_names
from fixer.analysis.loop_reach import callee_method, class_key, loop_file, stored_from_outside, walking_steps
from fixer.analysis.names import dotted, qualified
from fixer.analysis.no_grad import eval_only, under_no_grad
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.scopes import CALLS, Scope, nodes_of, scope_nodes, scopes, statement_index
from fixer.context import FileContext

CREATION = re.compile(r"^torch\.(zeros|ones|empty|full|rand|randn|tensor)(_like)?$")
WRITING_METHODS = frozenset({"copy_", "add_", "index_copy_", "index_add_", "scatter_", "scatter_add_", "masked_scatter_"})
CUTTING_METHODS = frozenset({"detach", "detach_", "requires_grad_", "zero_", "fill_"})


@dataclass(frozen=True)
class HistoryWrite:
    cls: ast.ClassDef
    attr: str
    method: Scope  # the method that writes
    write: ast.stmt
    loop: ast.AST
    call: BackwardCall
    loop_in: str = ""  # the file of the loop, when it is not the class's


def walked_histories(ctx: FileContext) -> list[HistoryWrite]:
    def compute() -> list[HistoryWrite]:
        writes = {}
        for cls in statement_index(ctx).classes:
            for attr in persistent_tensors(ctx, cls):
                for method in class_methods(ctx, cls).values():
                    write = _history_write(ctx, method, attr)
                    if write is not None:
                        writes.setdefault((class_key(ctx, cls), attr), (cls, method, write))
        if not writes:
            return []
        steps = walking_steps(ctx, {key: method for key, (_, method, _) in writes.items()})
        found = []
        for key, step in steps.items():
            cls, method, write = writes[key]
            found.append(HistoryWrite(cls, key[1], method, write, step.loop, step.call, loop_file(ctx, step)))
        return found

    return ctx.memo("walked_histories", compute)


def persistent_tensors(ctx: FileContext, cls: ast.ClassDef) -> set[str]:
    def compute() -> set[str]:
        methods = class_methods(ctx, cls)
        init = methods.get("__init__")
        if init is None:
            return set()
        made = {a for a, ws in attribute_writes(ctx, cls).items() if any(_makes_tensor(ctx, w) for w in ws)}
        made |= _registered_buffers(ctx, init)
        outside = stored_from_outside(ctx)
        return {a for a in made if a not in outside and _kept(ctx, cls, a) and not _cut_in_place(ctx, a)}

    return ctx.memo(("persistent_tensors", id(cls)), compute)


def _makes_tensor(ctx: FileContext, write: Write) -> bool:
    value = write.value
    return (write.method.node.name == "__init__" and isinstance(value, ast.Call)
            and CREATION.match(qualified(ctx, value.func) or "") is not None)


def _registered_buffers(ctx: FileContext, init: Scope) -> set[str]:
    found = set()
    for node in scope_nodes(init):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register_buffer"
                and dotted(node.func.value) == init.self_name and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            found.add(node.args[0].value)
    return found


def _kept(ctx: FileContext, cls: ast.ClassDef, attr: str) -> bool:
    """Every store but the one that makes it rebinds the field from itself, uncut
    (``self.cache = self.cache.to(x)``); AugAssign on a tensor writes in place."""
    for write in attribute_writes(ctx, cls).get(attr, []):
        if _makes_tensor(ctx, write) or isinstance(write.stmt, ast.AugAssign):
            continue
        value, self_name = write.value, write.method.self_name
        if value is None or not _from_itself(value, f"{self_name}.{attr}"):
            return False
    return True


def _from_itself(value: ast.expr, name: str) -> bool:
    """``name.method(...)...`` chains of tensor methods on the field itself, none of them cutting."""
    node = value
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in CUTTING_METHODS:
            return False
        node = node.func.value
    return node is not value and dotted(node) == name


def _cut_in_place(ctx: FileContext, attr: str) -> bool:
    """Some code detaches the field in place (``bank.memory.detach_()``) or clears it."""
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CUTTING_METHODS
        and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == attr
        for scope in scopes(ctx) for node in nodes_of(scope, CALLS)
    )


def _history_write(ctx: FileContext, method: Scope, attr: str) -> Optional[ast.stmt]:
    """The method's first in-place write of a graph-carrying value into ``self.<attr>``."""
    field = f"{method.self_name}.{attr}"
    graph, nodes = facts(ctx, method), scope_nodes(method)
    carried: Optional[set[str]] = None
    for node in nodes:
        value = _written_value(node, field)
        if value is None or under_no_grad(ctx, node) or eval_only(ctx, node, method):
            continue
        stmt = ctx.statement_of(node)
        if graph.kind(value, stmt) == Kind.GRAPH:
            return stmt
        if carried is None:
            carried = derived_names(ctx, graph, _graph_parameters(ctx, method), nodes)
        if flowing_names(ctx, value) & carried:
            return stmt
    return None


def _written_value(node: ast.AST, field: str) -> Optional[ast.expr]:
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Subscript) and dotted(t.value) == field for t in targets):
            return node.value
        if isinstance(node, ast.AugAssign) and dotted(node.target) == field:
            return node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITING_METHODS and node.args:
        receiver = node.func.value
        receiver = receiver.value if isinstance(receiver, ast.Subscript) else receiver
        if dotted(receiver) == field:
            return node.args[-1] if node.func.attr != "add_" else node.args[0]
    return None


def _graph_parameters(ctx: FileContext, method: Scope) -> set[str]:
    """Parameters of ``method`` to which every call of it passes a graph (positionally): its calls
    in this file and in the files importing its class (``project_call_sites``; a use there that
    is not a call leaves every parameter unknown); none when nothing calls it."""
    params = [a.arg for a in method.node.args.posonlyargs + method.node.args.args][1:]
    sites = [(ctx, where, call) for where, call in _call_sites(ctx, method)]
    for own, where, call in project_call_sites(ctx, method):
        if own.path != ctx.path:
            if call is None:
                return set()
            sites.append((own, where, call))
    if not sites or not params:
        return set()
    found = set()
    for index, param in enumerate(params):
        kinds = [facts(own, where).kind(call.args[index], own.statement_of(call)) if index < len(call.args) else Kind.NONE
                 for own, where, call in sites]
        if all(k == Kind.GRAPH for k in kinds):
            found.add(param)
    return found


def _call_sites(ctx: FileContext, method: Scope) -> list[tuple[Scope, ast.Call]]:
    name = method.node.name
    return [
        (scope, node) for scope in scopes(ctx) for node in nodes_of(scope, CALLS)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name
        and getattr(callee_method(ctx, scope, node.func, set(), {}), "node", None) is method.node
    ]
