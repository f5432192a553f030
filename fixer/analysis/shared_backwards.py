"""Backward calls that walk one graph (GF105's query): a loop that backpropagates, one by one,
losses sharing a saving part of one graph (``for loss in losses: loss.backward()``); the first
later call in the same pass that walks a saving part of an earlier call's graph; and the chain
of plain ``x.backward()`` statements of one block, with nothing between them touching gradients
or parameters, that can be merged into one backward of their sum."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.calls import BackwardCall
from fixer.analysis.gradient_effects import Effect, gradient_effect
from fixer.analysis.graph import facts
from fixer.analysis.names import dotted
from fixer.analysis.passes import guarded_unit, same_guard
from fixer.analysis.scopes import Scope, enclosing_block, enclosing_loops
from fixer.analysis.shared_graph import (
    flowing_nodes,
    graph_origins,
    Origin,
    reaching,
    runs_after_in_same_pass,
    same_value,
    shared_saving_origins,
)
from fixer.context import FileContext
from fixer.nodes import walk


def loop_over_losses(ctx: FileContext, scope: Scope, call: BackwardCall) -> Optional[tuple[ast.For, list[ast.expr]]]:
    """``for loss in losses: loss.backward()`` over a list whose elements share a saving part of
    one graph: ``[crit(o, y) for o in model(x)]`` (one forward's outputs), ``[crit(head(h), y) for
    head in heads]`` (one trunk), ``[loss_a, loss_b]``. The backward may sit under a filter of the
    loss (``if loss is not None:``) or in a function that only backpropagates its argument
    (``train_step(loss)``). The loop's other statements, if any, touch no gradient, parameter or
    name the loop reads (``print(...)``, a counter). Returns the loop and its filters' tests."""
    unit = ctx.statement_of(call.node)
    tests: list[ast.expr] = []  # filters, outermost first
    while isinstance(parent := ctx.parent(unit), ast.If) and not parent.orelse and len(parent.body) == 1 and _pure_test(parent.test):
        unit = parent
        tests.insert(0, parent.test)
    loop = ctx.parent(unit)
    if not isinstance(loop, ast.For) or loop.orelse or not any(s is unit for s in loop.body):
        return None
    if _loss_of(call) != loop_value(loop) or loop_value(loop) is None:
        return None
    others = [s for s in loop.body if s is not unit]
    if others and not _inert(ctx, scope, others, loop):
        return None
    if {n.id for t in tests for n in walk(t) if isinstance(n, ast.Name)} & bound_in(loop.body) - bound_in([loop.target]):
        return None  # the filter reads what the loop's body computes
    items = loop.iter
    if isinstance(items, ast.Call) and isinstance(items.func, ast.Attribute) and not items.args:
        if items.func.attr not in ("values", "items") or (items.func.attr == "items") != isinstance(loop.target, ast.Tuple):
            return None
        items = items.func.value  # a dict of losses: its values
    elif isinstance(loop.target, ast.Tuple):
        return None
    if isinstance(items, ast.Name):
        defs = reaching(facts(ctx, scope), items.id, loop)
        if len(defs) != 1 or defs[0][1] is None or not isinstance(defs[0][0], ast.Assign):
            return None
        at, items = defs[0]
    else:
        at = loop
    if isinstance(items, ast.Dict) and isinstance(loop.iter, ast.Call) and len(items.values) > 1 and all(items.keys):
        origins = [graph_origins(ctx, scope, v, at) for v in items.values]
        shared = frozenset.intersection(*origins)
    elif isinstance(items, ast.Dict):
        return None
    elif isinstance(items, (ast.List, ast.Tuple)) and len(items.elts) > 1 and not isinstance(loop.iter, ast.Call):
        origins = [graph_origins(ctx, scope, e, at) for e in items.elts]
        shared = frozenset.intersection(*origins)
    elif isinstance(items, ast.ListComp) and len(items.generators) == 1 and not isinstance(loop.iter, ast.Call):
        generator = items.generators[0]
        bound = {n.id for n in walk(generator.target) if isinstance(n, ast.Name)}
        flowing = [n for n in flowing_nodes(ctx, items.elt) if isinstance(n, (ast.Name, ast.Attribute))]
        sources = [n for n in flowing if (dotted(n) or "").split(".")[0] not in bound]
        if bound & {(dotted(n) or "").split(".")[0] for n in flowing}:
            sources.append(generator.iter)  # each element computed from one item of one evaluation
        shared = frozenset().union(*(graph_origins(ctx, scope, n, at) for n in sources)) if sources else frozenset()
    else:
        return None
    return (loop, tests) if any(o.saves for o in shared) else None


PURE_TEST = (ast.Name, ast.Attribute, ast.Constant, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Subscript, ast.Tuple)  # no call


def _pure_test(test: ast.expr) -> bool:
    """A filter that calls nothing: evaluating it for every loss before any backward reads what
    evaluating it between them would (``loss is not None``, ``name != "aux"``, ``loss.requires_grad``)."""
    return all(isinstance(n, PURE_TEST) for n in walk(test))  # (fixer.nodes.walk skips operators and contexts)


def bound_in(stmts: list[ast.AST]) -> set[str]:
    return {n.id for s in stmts for n in walk(s) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}


def _loss_of(call: BackwardCall) -> Optional[str]:
    """The name ``call`` backpropagates with its plain ``backward()``: ``loss.backward()``, or
    ``train_step(loss)`` of a function that backpropagates that parameter on every call."""
    if call.kind == "method":
        return call.target.id if _plain(call) and isinstance(call.target, ast.Name) else None
    fed = call.target.elts if call.kind == "call" else []  # what a step function's every call backpropagates
    return fed[0].id if len(fed) == 1 and isinstance(fed[0], ast.Name) else None


def _inert(ctx: FileContext, scope: Scope, stmts: list[ast.stmt], loop: ast.For) -> bool:
    """``stmts`` touch no gradient or parameter and bind no name the loop header reads."""
    header = {n.id for part in (loop.target, loop.iter) for n in walk(part) if isinstance(n, ast.Name)}
    bound = {n.id for s in stmts for n in walk(s) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    return not header & bound and gradient_effect(ctx, scope, stmts) == Effect.NONE


def loop_value(loop: ast.For) -> Optional[str]:
    """The name bound to each loss: ``for loss in ...`` or ``for name, loss in d.items()``."""
    target = loop.target
    if isinstance(target, ast.Tuple) and len(target.elts) == 2:
        target = target.elts[1]
    return target.id if isinstance(target, ast.Name) else None


def standalone(ctx: FileContext, call: BackwardCall) -> bool:
    stmt = ctx.statement_of(call.node)
    return isinstance(stmt, ast.Expr) and stmt.value is call.node and call.kind != "autograd.grad"


def next_sharing(ctx: FileContext, scope: Scope, call: BackwardCall, later: list[BackwardCall]) -> Optional[tuple[BackwardCall, frozenset[Origin]]]:
    """The first later call that walks a saving part of ``call``'s graph, built in the same pass."""
    stmt = ctx.statement_of(call.node)
    for other in later:
        if not runs_after_in_same_pass(ctx, scope, stmt, ctx.statement_of(other.node)):
            continue
        if same_value(ctx, scope, call, other):
            return None  # the same tensor again: GF106
        origins = shared_saving_origins(ctx, scope, call, other)
        if not origins:
            continue
        loops = enclosing_loops(ctx, stmt, scope)
        if loops and not all(strictly_inside(ctx, o.stmt, loops[0]) for o in origins):
            return None  # shared part built before the loop: GF102
        return other, origins
    return None


def mergeable_chain(ctx: FileContext, scope: Scope, first: BackwardCall, later: list[BackwardCall]) -> list[BackwardCall]:
    """``first`` and the following plain ``x.backward()`` statements of the same block that share
    its graph, with nothing between them touching gradients or parameters."""
    if not _plain(first):
        return []
    chain = [first]
    unit = backward_unit(ctx, first)
    block = enclosing_block(ctx, unit)
    for other in later:
        stmt = backward_unit(ctx, other)
        if block is None or not any(s is stmt for s in block) or not _plain(other) or not same_guard(ctx, unit, stmt):
            break
        if not any(shared_saving_origins(ctx, scope, c, other) for c in chain) or same_value(ctx, scope, chain[-1], other):
            break
        between = _statements_between(block, backward_unit(ctx, chain[-1]), stmt)
        if gradient_effect(ctx, scope, between) != Effect.NONE:
            break
        chain.append(other)
    return chain if len(chain) > 1 else []


def backward_unit(ctx: FileContext, call: BackwardCall) -> ast.stmt:
    """The call's statement, or the shared guard holding only it: two such guards with one test
    run together, so their calls merge and the second guard goes."""
    return guarded_unit(ctx, ctx.statement_of(call.node))


def _plain(call: BackwardCall) -> bool:
    return call.kind == "method" and not call.node.args and not call.node.keywords


def all_available_at(ctx: FileContext, scope: Scope, chain: list[BackwardCall], host: BackwardCall) -> bool:
    """Every target means the same value at ``host`` as at its own call."""
    graph = facts(ctx, scope)
    for call in chain:
        for node in walk(call.target):
            name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if name is None:
                continue
            here, there = reaching(graph, name, host.node), reaching(graph, name, call.node)
            if [id(s) for s, _ in here] != [id(s) for s, _ in there]:
                return False
            if any(_after(s, host.node) for s, _ in here):
                return False  # assigned only later (reaching() then returns every assignment)
    return True


def _statements_between(block: list[ast.stmt], first: ast.stmt, second: ast.stmt) -> list[ast.stmt]:
    ids = [id(s) for s in block]
    return block[ids.index(id(first)) + 1 : ids.index(id(second))]


def strictly_between(node: ast.stmt, first: ast.stmt, second: ast.stmt) -> bool:
    return (first.end_lineno, first.end_col_offset) <= (node.lineno, node.col_offset) and _after(second, node)


def _after(node: ast.AST, at: ast.AST) -> bool:
    return (node.lineno, node.col_offset) > (at.lineno, at.col_offset)


def strictly_inside(ctx: FileContext, node: ast.AST, container: ast.AST) -> bool:
    return any(parent is container for parent in ctx.ancestors(node))
