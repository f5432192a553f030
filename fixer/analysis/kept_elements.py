"""Graphs an object keeps from one training iteration to the next through a method that adds the
elements of its argument into a field (``meters.update(losses)`` with ``self.sums[name] += value``).

``kept_elements(ctx)`` yields, for each such store of this file's classes (``element_stores``),
the call that makes it a leak: a call of the method in a loop that backpropagates, outside
``torch.no_grad()``, on an object made before that loop (so its fields outlive the iteration),
passing a container with an element that carries a graph (``element_kinds``). The field must be
read only by the object's own methods, each read converting what it reads to a number or reading
it through ``.item()``/``.tolist()``/``.detach()`` (``numeric_readers``): nothing backpropagates it.

A store under ``torch.no_grad()`` keeps a graph only where it keeps an element itself or a view of it
(``self.last[k] = v``), not a tensor computed from it (``self.ema[k] = 0.9 * self.ema[k] + 0.1 * v``).

The fix is chosen from the same facts: ``item`` when every read converts with ``float()``/``int()``
(each element is then a one-element tensor, and a Python number serves every reader), ``detach``
when some read needs a tensor, None (report only) unless every call of the method in the project
passes only tensors there (a number has no ``.item()``)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator, Optional

from fixer.analysis.call_sites import init_field
from fixer.analysis.calls import backpropagates_in
from fixer.analysis.element_stores import ElementStore, bound_argument, element_kinds, element_stores, numeric_readers
from fixer.analysis.graph import Kind, facts
from fixer.analysis.project_callers import project_call_sites, project_life_field, step_arguments
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.scopes import Scope, enclosing_loops, scopes
from fixer.analysis.vocabulary import TENSOR_VIEWS
from fixer.context import FileContext

TENSOR_KINDS = frozenset({Kind.GRAPH, Kind.LEAF})
MAX_CALL_DEPTH = 2  # step functions and methods between the store's call and the loop


@dataclass(frozen=True)
class KeptElements:
    store: ElementStore
    call: ast.Call  # a call that passes graphs into the store from a backpropagating loop
    fix: Optional[str]  # "item", "detach", or None when the fix is not proven


def kept_elements(ctx: FileContext) -> Iterator[KeptElements]:
    for method in scopes(ctx):
        if method.class_node is None:
            continue
        for store in element_stores(ctx, method):
            if under_no_grad(ctx, store.stmt) and not any(_kept_as_is(ctx, e, store.stmt) for e in store.elements):
                continue  # ``ema = (1 - a) * ema + a * v`` under no_grad: a new tensor without a graph
            readers = numeric_readers(ctx, method.class_node, store)
            if readers is None:
                continue
            leaking, only_tensors = None, True
            for own, caller, call in project_call_sites(ctx, method):
                argument = bound_argument(method, store.parameter, call) if call is not None else None
                kinds = element_kinds(own, caller, argument, call, store.iterated) if argument is not None else None
                only_tensors = only_tensors and bool(kinds) and kinds <= TENSOR_KINDS
                if leaking is None and kinds and Kind.GRAPH in kinds and _across_iterations(own, caller, call):
                    leaking = call
            if leaking is not None:
                fix = ("item" if readers == "number" else "detach") if only_tensors else None
                yield KeptElements(store, leaking, fix)


def _kept_as_is(ctx: FileContext, element: ast.expr, stmt: ast.stmt) -> bool:
    """The store keeps the element's tensor itself, or a view of it (which keeps its base and the
    base's graph), not a tensor computed from it: with recording off, only these hold a graph."""
    for parent in ctx.ancestors(element):
        if parent is stmt:
            return True
        if isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp)):
            return False
        if isinstance(parent, ast.Call) and not (isinstance(parent.func, ast.Attribute) and parent.func.attr in TENSOR_VIEWS):
            return False
    return True


def _across_iterations(ctx: FileContext, caller: Scope, call: ast.Call) -> bool:
    """The call runs in a loop that backpropagates, with grad recording on, on an object bound
    before that loop: what its fields keep survives into the next iteration. A call in a step
    function or method (no loop of its own) runs in each iteration of the loop around a call of
    it: on an object its parameter holds, when that call's argument is bound before the loop; on
    its own object (``self.update(losses)``) or an object its ``self`` holds for life
    (``project_callers.project_life_field``, ``init_field``), when the receiver of that call is bound
    before the loop; the calls are the project's, in whichever file makes them. That call may sit
    in a step function or method itself (``train_step(trainer, x)`` calling ``trainer.step(x)``):
    followed the same way, ``MAX_CALL_DEPTH`` calls up."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    if receiver is None or under_no_grad(ctx, call):
        return False
    loops = enclosing_loops(ctx, call, caller)
    if loops:
        return _made_before_loop(ctx, caller, call, receiver) and receiver.id != caller.self_name
    steps = backpropagates_in(ctx, caller, caller.node)  # then so does every loop around a call of it
    return _outer_calls(ctx, caller, receiver, steps, 0)


def _outer_calls(ctx: FileContext, caller: Scope, receiver: ast.expr, steps: bool, depth: int) -> bool:
    """Some call of ``caller`` (a function or method without a loop around ``receiver``'s use)
    runs in a loop on an object bound before it, which ``receiver`` then holds."""
    held = project_life_field(ctx, caller, receiver) is not None or init_field(ctx, caller, receiver) or isinstance(receiver, ast.Name) and receiver.id == caller.self_name
    if not (held or isinstance(receiver, ast.Name)) or depth > MAX_CALL_DEPTH:
        return False
    if held:
        sites = [(own, s, site, site.func.value) for own, s, site in project_call_sites(ctx, caller) if site is not None and isinstance(site.func, ast.Attribute)]
    elif receiver.id != caller.self_name:
        sites = list(step_arguments(ctx, caller, receiver.id))
    else:
        return False
    return any(_made_before_loop(own, scope, site, value, steps, depth) for own, scope, site, value in sites)


def _made_before_loop(ctx: FileContext, scope: Scope, call: ast.Call, receiver: ast.expr, steps: bool = False, depth: int = 0) -> bool:
    """``receiver`` (a name) is bound before the innermost loop around ``call``, which backpropagates
    (known from the function ``call`` runs, with ``steps``, or read from the loop); with no loop
    around ``call``, asked of the calls of its function (``_outer_calls``)."""
    loops = enclosing_loops(ctx, call, scope)
    if not loops and not under_no_grad(ctx, call) and not isinstance(scope.node, ast.Module):
        return _outer_calls(ctx, scope, receiver, steps, depth + 1)
    if not isinstance(receiver, ast.Name) or not loops or under_no_grad(ctx, call) or not (steps or backpropagates_in(ctx, scope, loops[0])):
        return False
    defs = facts(ctx, scope).reaching(receiver.id, call)
    return bool(defs) and not any(any(a is loops[0] for a in ctx.ancestors(stmt)) for stmt, _ in defs)
