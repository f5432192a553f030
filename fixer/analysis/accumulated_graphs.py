"""Losses kept with their graph by a running total (GF301's findings, ``accumulated_graphs``): an
accumulation (``fixer.analysis.accumulations``) that outlives a training iteration that frees its
graphs, or feeds an evaluation loop of a training function, whose total is never backpropagated;
the parts of the added value that carry the graph, and whether a number (``.item()``) or a
detached tensor must take their place. A value that is itself another reported total's part
(``history.append(epoch_loss / n)``) is fixed with that total."""

from __future__ import annotations

import ast
from typing import Iterator, NamedTuple

from fixer.analysis.call_events import resolved_callee
from fixer.analysis.accumulations import (
    ACCUMULATING,
    accumulation,
    differentiable_gradient,
    dotted_names,
    escapes,
    graph_part,
    is_accumulation_of,
    is_meter_update,
    iteration_of,
    logged_record,
    outlives_iteration,
    reaches_backward,
)
from fixer.analysis.calls import BACKWARD_TEXT, training_call_text
from fixer.analysis.graph import facts
from fixer.analysis.held_values import held_name
from fixer.analysis.meters import is_meter
from fixer.analysis.importers import project_constructions
from fixer.analysis.names import dotted
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.numeric_totals import full_reduction, numeric_use, scalar_loss
from fixer.analysis.reported import evaluation_loop, fed_by_graph
from fixer.analysis.scopes import Scope, nodes_of, scope_nodes
from fixer.analysis.training_regions import calls_training_method, framework_training_step, frees_graphs_in, instance_method, returns_backpropagated, training_methods
from fixer.context import FileContext

MAX_DEPTH = 2  # training methods followed to find an optimizer step


class Accumulated(NamedTuple):
    stmt: ast.stmt  # the accumulation
    accumulator: str  # ``running_loss``, ``self.total``, ``history``
    parts: list[ast.expr]  # the added values (a record's values) that carry the graph
    record: bool  # a record (``{"loss": loss}``) whose graph-carrying values are kept
    method: str  # "item" for a scalar loss totalled as a number, else "detach"
    also_kept: tuple[ast.expr, ...] = ()  # a meter's other arguments its update keeps with their graph (no fix of one alone)


def accumulated_graphs(ctx: FileContext, scope: Scope) -> Iterator[Accumulated]:
    found = list(_candidates(ctx, scope))
    totals = {f.accumulator for f in found}
    for item in found:
        # `history.append(epoch_loss / n)` is fixed by fixing `epoch_loss` itself
        if not (dotted_names(item.parts[0]) & (totals - {item.accumulator})):
            yield item


def _candidates(ctx: FileContext, scope: Scope) -> Iterator[Accumulated]:
    framework_step = framework_training_step(scope)
    evaluation_only = not framework_step and not ctx.mentions(scope.node, BACKWARD_TEXT) and not ctx.mentions(scope.node, training_call_text(ctx))
    statements = nodes_of(scope, ACCUMULATING)  # (``accumulation`` answers None for any other node)
    if evaluation_only and not any(accumulation(n) for n in statements):
        return  # nothing here backpropagates, and nothing accumulates
    graph = facts(ctx, scope)
    for node in statements:
        found = accumulation(node, graph)
        if found is None:
            continue
        stmt, accumulator, value = found
        value = held_name(ctx, scope, value) or value  # total += out["loss"]: the value of loss
        if under_no_grad(ctx, stmt) or not outlives_iteration(ctx, scope, graph, stmt, accumulator):
            continue
        if escapes(ctx, scope, graph, accumulator) and differentiable_gradient(ctx, graph, value, stmt):
            continue  # a returned sum of create_graph=True gradients is meant to be backpropagated
        iteration = iteration_of(ctx, scope, stmt)
        if evaluation_only and not (evaluation_loop(ctx, scope, graph, stmt, accumulator, value, is_accumulation_of)
                                    and fed_by_graph(graph, value, stmt)):
            continue
        if evaluation_only:
            evaluation = True
        elif frees_graphs_in(ctx, scope, iteration) or (framework_step and iteration is scope.node):
            if (escapes(ctx, scope, graph, accumulator) or _returned_by_owners(ctx, scope, accumulator)) and not _may_update_parameters(ctx, scope, iteration):
                continue  # a function that backpropagates but trains nothing (its backward takes a derivative) returns the sum it asked for
            evaluation = False
        elif evaluation_loop(ctx, scope, graph, stmt, accumulator, value, is_accumulation_of):
            evaluation = True
        elif calls_training_method(ctx, scope, iteration):
            evaluation = False
        else:
            continue  # not a loop that backpropagates every iteration, nor an evaluation loop of a training function
        record = logged_record(ctx, scope, graph, value, stmt)
        if record is not None:  # history.append({"loss": loss, ...})
            parts = [v for v in record.values if graph.carries_graph(v, stmt)]
            if not parts or any(isinstance(v, ast.Name) and graph.sometimes_detached(v.id, stmt) for v in parts):
                continue
            if not reaches_backward(ctx, scope, graph, accumulator):
                yield Accumulated(stmt, accumulator, parts, True, "detach")
            continue
        part = graph_part(graph, value, stmt)
        if part is None and returns_backpropagated(ctx, scope, value):
            part = value  # losses.append(agent.update(batch)): the method returns the loss it backpropagated
        if part is None or reaches_backward(ctx, scope, graph, accumulator):
            continue
        numeric = is_meter_update(node) or numeric_use(ctx, scope, graph, accumulator, node)
        scalar = scalar_loss(ctx, scope, part) or full_reduction(ctx, scope, graph, part, stmt)
        also = tuple(a for i, a in enumerate(node.value.args[1:], 1) if is_meter(node.value.func.value, graph, i) and graph.carries_graph(a, stmt)) \
            if is_meter_update(node) else ()
        yield Accumulated(stmt, accumulator, [part], False, "item" if scalar and numeric and not evaluation else "detach", also)


def _may_update_parameters(ctx: FileContext, scope: Scope, region: ast.AST, depth: int = MAX_DEPTH) -> bool:
    """The function may step an optimizer: a call of ``step`` on anything but an object of a project
    class whose ``step`` method does not (an optimizer we cannot resolve counts), a training method
    the region calls that may (past ``depth``, any), or a framework's step. A function that backpropagates with none of these does it to take a derivative
    (``x.grad`` of a collocation point), and a sum it returns is what its caller asked for."""
    if framework_training_step(scope):
        return True
    steps = [n for n in scope_nodes(scope) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step"]
    called = [instance_method(ctx, scope, n.func) for n in steps] + list(training_methods(ctx, scope, region))
    return any(m is None or depth == 0 or _may_update_parameters(m.ctx or ctx, m, m.node, depth - 1) for m in called)


def _returned_by_owners(ctx: FileContext, scope: Scope, accumulator: str) -> bool:
    """A total on ``self`` (``self.weighted += ...``) whose every object, in the whole project, is
    made by a function that trains nothing, used there only through its attributes and methods, and
    whose field it reads back into what it returns: the total lives for one call of that function,
    which hands it to its caller as a returned sum. Unknown constructions answer False."""
    head, _, field = accumulator.partition(".")
    if scope.class_node is None or head != scope.self_name or not field or "." in field:
        return False
    made = project_constructions(ctx, scope.class_node)
    if not made:
        return False
    for home, owner, call in made:
        name = home.parent(call).targets[0].id
        if isinstance(owner.node, ast.Module) or _may_update_parameters(home, owner, owner.node):
            return False
        if not _only_through_attributes(home, owner, name) or not escapes(home, owner, facts(home, owner), f"{name}.{field}"):
            return False
    return True


def _only_through_attributes(ctx: FileContext, scope: Scope, name: str) -> bool:
    """Every read of ``name`` in the scope is ``name.<attribute>``: the object is never passed on."""
    reads = [n for n in scope_nodes(scope) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    return all(isinstance(ctx.parent(n), ast.Attribute) for n in reads)


CONTAINERS = (ast.Dict, ast.List, ast.Tuple, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
MAX_CONTAINER_DEPTH = 3


def may_be_container(ctx: FileContext, scope: Scope, value: ast.expr, depth: int = 0) -> bool:
    """``value`` may be a dict, list, tuple or set rather than a tensor: a display, a name one of
    whose assignments reaching it is one, or a call of a function or method of the project one of
    whose returns is (``output = wrapper.training_step(batch)`` returning ``{"loss": ...}``): then
    ``.detach()`` / ``.item()`` on it would raise. A call we cannot see into is taken for a tensor."""
    if isinstance(value, CONTAINERS):
        return True
    if depth >= MAX_CONTAINER_DEPTH:
        return False
    if isinstance(value, (ast.Name, ast.Attribute)) and (name := dotted(value)):
        return any(v is not None and may_be_container(ctx, scope, v, depth + 1) for _, v in facts(ctx, scope).reaching(name, value))
    if isinstance(value, ast.Call):
        callee = resolved_callee(ctx, scope, value)
        if callee is not None and not isinstance(callee.node, ast.Module):
            own = callee.ctx or ctx
            returns = [n.value for n in scope_nodes(callee) if isinstance(n, ast.Return) and n.value is not None]
            return any(may_be_container(own, callee, r, depth + 1) for r in returns)
    return False
