"""Backward passes through a forward whose parameters an optimizer step changed in the meantime.

A module applied to a graph-carrying input saves its weights for the backward pass (the input's
gradient needs them). ``opt.step()`` updates the weights in place, which bumps their version, so
a backward that walks a forward evaluated *before* the step raises "one of the variables needed
for gradient computation has been modified by an inplace operation" (torch >= 1.5).

``stale_walks(ctx, scope)`` lists, for each backward call, such a walk when it is proven: the
loss derives (through assignments with one reaching definition each) from a module call whose
input carries a graph, evaluated before a step of an optimizer built from that module's
parameters, the step running before the backward in the same pass. Also the statements to run
again after the step to rebuild what the loss needs (``recompute``), when copying them is sound.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

from fixer.analysis.call_events import call_events
from fixer.analysis.calls import BackwardCall, OptimizerCall, backward_calls, optimizer_calls, retains_graph
from fixer.analysis.gan_roles import producers, trains
from fixer.analysis.gan_steps import optimizer_steps, position
from fixer.analysis.graph import NON_SAVING, TENSOR_METHODS, GraphFacts, Kind, facts
from fixer.analysis.names import dotted, qualified
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.protocol import optimizer_params
from fixer.analysis.saving_modules import saves_own_weights
from fixer.analysis.scopes import CALLS, Scope, nodes_of
from fixer.analysis.training_calls import may_call_step_functions, training_calls
from fixer.analysis.shared_graph import flowing_nodes, reaching, runs_after_in_same_pass, pass_loop, shared_saving_origins
from fixer.context import FileContext
from fixer.nodes import walk as walk_nodes

MAX_DEPTH = 6  # assignments followed back from the loss
HELPER_STEP = "helper step"  # an OptimizerCall kind: the step a called helper runs after its own backward
PURE_BUILTINS = frozenset({"min", "max", "sum", "abs"})


@dataclass(frozen=True)
class StaleWalk:
    backward: BackwardCall
    step: OptimizerCall  # the step that changed the module's parameters after its forward
    forward: ast.Call  # the module call whose saved weights the backward needs
    recompute: Optional[tuple[ast.stmt, ...]]  # assignments to run again before the backward; None: not sound


@dataclass(frozen=True)
class _Definition:
    stmt: ast.stmt
    value: ast.expr
    sources: tuple["_Definition", ...]  # the definitions its value reads


def stale_walks(ctx: FileContext, scope: Scope) -> list[StaleWalk]:
    def compute() -> list[StaleWalk]:
        owners = optimizer_params(ctx)
        steps = [s for s in optimizer_steps(ctx, scope) if owners.get(s.owner)]
        helper_steps = _helper_steps(ctx, scope, owners)
        steps = sorted(steps + helper_steps, key=lambda s: position(s.node))
        if not steps:
            return []
        calls = backward_calls(ctx, scope) + (training_calls(ctx, scope) if helper_steps else [])
        found, by_loop = [], {}  # steps of another loop cannot run before a backward in its pass
        for step in steps:
            by_loop.setdefault(pass_loop(ctx, ctx.statement_of(step.node), scope), []).append(step)
        for call in calls:
            walk = _stale_walk(ctx, scope, call, calls, by_loop.get(pass_loop(ctx, ctx.statement_of(call.node), scope), []), owners)
            if walk is not None:
                found.append(walk)
        return found

    return ctx.memo(("stale_walks", id(scope.node)), compute)


def _stale_walk(ctx, scope, call, calls, steps, owners) -> Optional[StaleWalk]:
    graph = facts(ctx, scope)
    here = ctx.statement_of(call.node)
    before = [s for s in steps if runs_after_in_same_pass(ctx, scope, ctx.statement_of(s.node), here)
              and (s.kind == HELPER_STEP or _applies_gradients(ctx, scope, s, calls))]
    if not before:
        return None
    roots = _definitions(ctx, graph, call.target, call.node, MAX_DEPTH, {})
    stale: dict[int, tuple[ast.Call, OptimizerCall]] = {}
    for definition in _all(roots):
        for forward in _module_calls(ctx, graph, definition):
            step = next((s for s in before if _changes(ctx, scope, owners[s.owner], forward, definition.stmt, s)), None)
            if step is not None:
                stale.setdefault(id(definition.stmt), (forward, step))
    if not stale or _freed_before(ctx, scope, call, calls):
        return None
    forward, step = min(stale.values(), key=lambda pair: position(pair[0]))
    # the fix rebuilds every forward of a stepped module, on data too (its deeper layers save weights)
    changed = {id(d.stmt) for d in _all(roots) for f in _module_calls(ctx, graph, d)
               if any(_changes(ctx, scope, owners[s.owner], f, d.stmt, s, proven=False) for s in before)}
    helper = call.kind == "call" or step.kind == HELPER_STEP  # the fix would move or copy parts of a helper: none
    return StaleWalk(call, step, forward, None if helper else _recompute(ctx, graph, call, roots, changed))


def _helper_steps(ctx: FileContext, scope: Scope, owners: dict) -> list[OptimizerCall]:
    """Calls of project functions that backpropagate and then step a known optimizer on every call
    (``self._update(critic_loss, self.critic_opt)``): a step at the call, named as the caller names
    the optimizer, that applies the gradients of the helper's own backward."""
    if not may_call_step_functions(ctx, scope):
        return []
    found = []
    for node in nodes_of(scope, CALLS):
        events = call_events(ctx, scope, node) or []
        backward = next((i for i, e in enumerate(events) if e.kind == "backward" and not e.conditional), None)
        step = next((e for e in events[backward or 0:] if e.kind == "step" and not e.conditional), None) if backward is not None else None
        if step is not None and owners.get(step.owner):
            found.append(OptimizerCall(node, HELPER_STEP, step.owner))
    return found


def _applies_gradients(ctx: FileContext, scope: Scope, step: OptimizerCall, calls: list[BackwardCall]) -> bool:
    """A backward runs before the step in its pass, after the optimizer's last ``zero_grad()``
    there: otherwise the step has no gradient to apply (or it is GF202's step before backward)."""
    at = ctx.statement_of(step.node)
    resets = [ctx.statement_of(z.node) for z in optimizer_calls(ctx, scope) if z.kind == "zero_grad" and z.owner == step.owner]
    resets = [r for r in resets if runs_after_in_same_pass(ctx, scope, r, at)]
    for call in calls:
        stmt = ctx.statement_of(call.node)
        if runs_after_in_same_pass(ctx, scope, stmt, at) and all(runs_after_in_same_pass(ctx, scope, r, stmt) for r in resets):
            return True
    return False


def _definitions(ctx: FileContext, graph: GraphFacts, expr: ast.expr, at: ast.AST, depth: int, seen: dict) -> tuple[_Definition, ...]:
    """The single reaching definitions of the names ``expr`` reads through graph-carrying flow."""
    if depth < 0:
        return ()
    found = []
    for node in flowing_nodes(ctx, expr):
        name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if name is None:
            continue
        defs = reaching(graph, name, at)
        if len(defs) != 1 or defs[0][1] is None or not isinstance(defs[0][0], ast.stmt) or under_no_grad(ctx, defs[0][0]):
            continue  # a branch, a loop-carried value, data from a loop target: no certain fact
        stmt, value = defs[0]
        key = (id(stmt), id(value))
        if key not in seen:
            seen[key] = None  # a cycle guard while its sources are computed
            seen[key] = _Definition(stmt, value, _definitions(ctx, graph, value, stmt, depth - 1, seen))
        if seen[key] is not None and all(d is not seen[key] for d in found):
            found.append(seen[key])
    return tuple(found)


def _all(roots: tuple[_Definition, ...]) -> list[_Definition]:
    found: dict[int, _Definition] = {}
    stack = list(roots)
    while stack:
        definition = stack.pop()
        if id(definition) not in found:
            found[id(definition)] = definition
            stack.extend(definition.sources)
    return list(found.values())


def _module_calls(ctx: FileContext, graph: GraphFacts, definition: _Definition) -> list[ast.Call]:
    """Module calls the definition's value evaluates (``critic(x)``, ``self.qnet(s, a)[0]``)."""
    return [
        node for node in flowing_nodes(ctx, definition.value, names=False)
        if isinstance(node, ast.Call) and dotted(node.func) is not None and _is_module(ctx, graph, node.func)
    ]


def _is_module(ctx: FileContext, graph: GraphFacts, func: ast.expr) -> bool:
    name = dotted(func)
    return graph.is_module(func) or any(models and name in models for models in optimizer_params(ctx).values())


def _changes(
    ctx: FileContext, scope: Scope, models: frozenset[str], forward: ast.Call, stmt: ast.stmt, step: OptimizerCall, proven: bool = True
) -> bool:
    """``step`` updates parameters ``forward`` saved: its optimizer trains the module, the step runs
    after the forward in the same pass and (``proven``) the module's input carries a graph, so the
    weights are saved for the input's gradient, or the module saves its deeper weights on any input."""
    if not trains(models, dotted(forward.func)):
        return False
    if not runs_after_in_same_pass(ctx, scope, stmt, ctx.statement_of(step.node)):
        return False
    if not proven:
        return True
    graph = facts(ctx, scope)
    inputs = [*forward.args, *(k.value for k in forward.keywords)]
    if any(graph.kind(arg, stmt) == Kind.GRAPH or producers(ctx, graph, arg, stmt) for arg in inputs):
        return True
    module = dotted(forward.func) or ""  # on data: the step must cover the whole module, whose weights it saves
    return any(module == m or module.startswith(m + ".") for m in models) and saves_own_weights(ctx, scope, forward.func)


def _freed_before(ctx: FileContext, scope: Scope, call: BackwardCall, calls: list[BackwardCall]) -> bool:
    """An earlier backward without retain_graph freed a saving part of the graph: the second one
    raises 'backward through the graph a second time' first (GF105 reports that)."""
    here = ctx.statement_of(call.node)
    for other in calls:
        if other is call or retains_graph(other) or not runs_after_in_same_pass(ctx, scope, ctx.statement_of(other.node), here):
            continue
        if shared_saving_origins(ctx, scope, other, call):
            return True
    return False


def _recompute(ctx: FileContext, graph: GraphFacts, call: BackwardCall, roots: tuple[_Definition, ...], stale: set[int]) -> Optional[tuple[ast.stmt, ...]]:
    """The definitions on the way from the stale forwards to the loss, in source order, when
    running copies of them right before the backward gives them their inputs' current values and
    does nothing but a forward pass."""
    derived: dict[int, bool] = {}

    def is_derived(definition: _Definition) -> bool:
        key = id(definition.stmt)
        if key not in derived:
            derived[key] = False
            derived[key] = key in stale or any(is_derived(d) for d in definition.sources)
        return derived[key]

    chosen = {id(d.stmt): d for d in _all(roots) if is_derived(d)}
    stmts = sorted((d.stmt for d in chosen.values()), key=position)
    here = ctx.statement_of(call.node)
    if not stmts or not ctx.is_own_line(here):
        return None
    rebound = {name for stmt in stmts for name in _targets(stmt)}
    for stmt in stmts:
        if not isinstance(stmt, ast.Assign) or not ctx.is_own_line(stmt) or not _targets(stmt):
            return None
        if stmt.end_lineno != stmt.lineno and ctx.indent_of(stmt.lineno) != ctx.indent_of(here.lineno):
            return None  # a multi-line statement is copied only at its own indentation
        if not _forward_only(ctx, graph, stmt.value, stmt):
            return None
        for node in walk_nodes(stmt.value):
            name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if name is None or name in rebound:
                continue
            if [id(s) for s, _ in graph.reaching(name, stmt)] != [id(s) for s, _ in graph.reaching(name, call.node)]:
                return None  # the copy would read another value of ``name``
    return tuple(stmts)


def _targets(stmt: ast.stmt) -> list[str]:
    """Names an assignment binds (``h`` or a field of a name, ``self.h``); empty unless every
    target is one or a tuple of them."""
    names = []
    for target in getattr(stmt, "targets", []):
        for node in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
            if not (isinstance(node, ast.Name) or isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
                return []
            names.append(dotted(node))
    return names


def _forward_only(ctx: FileContext, graph: GraphFacts, expr: ast.expr, at: ast.AST) -> bool:
    """Every call in ``expr`` is a module's forward, a torch function or a tensor method: running it
    again has no effect but recomputing values (no sampling helper, no logging)."""
    for node in walk_nodes(expr):
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if dotted(func) is not None and _is_module(ctx, graph, func):
            continue
        name = qualified(ctx, func) or ""
        if name.startswith("torch.") and not name.startswith(("torch.rand", "torch.normal", "torch.bernoulli", "torch.multinomial")):
            continue
        if isinstance(func, ast.Name) and func.id in PURE_BUILTINS:
            continue
        if isinstance(func, ast.Attribute) and (func.attr in TENSOR_METHODS or func.attr in NON_SAVING):
            continue
        return False
    return True
