"""Calls that run one training step inside a project function: ``loss, hidden = train_step(x,
hidden)`` where ``train_step`` (of this file, a method through ``self``, or imported from another
project file) backpropagates on every call.

``training_calls(ctx, scope)`` lists them. ``training_call(ctx, scope, call)`` describes one as a
``BackwardCall`` of kind "call" whose target is the tuple of the call's arguments that the
callee's backward walks and frees: arguments bound to parameters that flow into the backward's
loss before anything rebinds them, and that the callee never detaches. A callee that cannot be
read, that backpropagates only sometimes (unless every k-th call, ``if step % k == 0:``, given
the loop's counter), or that keeps its graph (``retain_graph``,
``create_graph``) or frees it in ``autograd.grad`` gives None; an ``autograd.grad`` that keeps
the graph (``create_graph=True``: a force or gradient-penalty term) leaves the freeing to the
backward."""

from __future__ import annotations

import ast
import re
from typing import Callable, Optional

from fixer.analysis.arguments import bound_arguments, parameters
from fixer.analysis.calls import BackwardCall, backward_call, backward_calls, frees_graph, imported_training_methods, optimizer_calls, training_functions
from fixer.analysis.carried_flow import Feeding, always_runs, contains, end_position, position, runs_on_every_pass, statement_effect
from fixer.analysis.flow import flowing_nodes
from fixer.analysis.bindings import imported_names
from fixer.analysis.graph import Kind, facts
from fixer.analysis.held_values import held_receiver
from fixer.analysis.names import dotted
from fixer.analysis.callees import called_function
from fixer.analysis.imported_definitions import imported_definition_matches, imported_step_names
from fixer.analysis.project_text import STEP_CALL
from fixer.analysis.scopes import CALLS, Scope, enclosing_loops, nodes_of, scope_nodes
from fixer.context import FileContext

CUT_METHODS = frozenset({"detach", "detach_", "item", "tolist", "numpy", "data"})


def training_calls(ctx: FileContext, scope: Scope) -> list[BackwardCall]:
    """Calls in ``scope`` of step functions: of this file, or imported from elsewhere (read when
    they are project files)."""

    def compute() -> list[BackwardCall]:
        gate = _callee_text(ctx)
        if gate is None or not ctx.mentions(scope.node, gate):
            return []  # cheap: the scope names no function that may backpropagate
        local, imported = training_functions(ctx) | imported_training_methods(ctx), imported_names(ctx) - {"torch"}
        candidates = []
        for node in nodes_of(scope, CALLS):
            if not isinstance(node, ast.Call) or backward_call(ctx, node) is not None:
                continue  # ``self.manual_backward(loss)`` is a backward call already
            name = dotted(held_receiver(ctx, scope, node.func)) or ""
            if name.rsplit(".", 1)[-1] in local or name.partition(".")[0] in imported and imported_definition_matches(ctx, node.func, STEP_CALL):
                candidates.append(node)
        if len(candidates) < 2:  # one call matters only once per pass of a loop around it
            candidates = [c for c in candidates if enclosing_loops(ctx, ctx.statement_of(c), scope)]
        found = []
        for node in candidates:
            call = training_call(ctx, scope, node)
            if call is not None and call.target.elts:
                found.append(call)
        return found

    return ctx.memo(("training_calls", id(scope.node)), compute)


def may_call_step_functions(ctx: FileContext, scope: Scope) -> bool:
    """The scope names a function that may backpropagate (of this file, or imported): a cheap
    test from text before its calls are resolved."""
    gate = _callee_text(ctx)
    return gate is not None and ctx.mentions(scope.node, gate)


def _callee_text(ctx: FileContext) -> Optional["re.Pattern[str]"]:
    """A pattern for the names through which this file may call a step function: its own
    functions that backpropagate, and imported names whose definitions may."""

    def compute() -> Optional["re.Pattern[str]"]:
        names = training_functions(ctx) | imported_training_methods(ctx) | imported_step_names(ctx)
        return re.compile(r"\b(?:%s)\b" % "|".join(map(re.escape, sorted(names)))) if names else None

    return ctx.memo("training_callee_text", compute)


def steps_optimizer(ctx: FileContext, scope: Scope, call: BackwardCall) -> bool:
    """The step function a training call runs also steps an optimizer."""
    callee = called_function(ctx, scope, call.node.func)
    return callee is not None and any(c.kind == "step" for c in optimizer_calls(callee.ctx or ctx, callee))


def training_call(ctx: FileContext, scope: Scope, call: ast.Call) -> Optional[BackwardCall]:
    callee = called_function(ctx, scope, held_receiver(ctx, scope, call.func))
    if callee is None or callee.node is scope.node or isinstance(callee.node, ast.Module):
        return None
    fed = fed_parameters(callee)
    if fed is None:
        return None
    guard = periodic_parameter(callee)
    if guard is not None and not _counts_passes(ctx, scope, call, callee, guard):
        return None  # ``if step % 2 == 0: loss.backward()`` given something else than the loop's counter
    arguments = [a for a in bound_arguments(callee, call) if a[0] in fed]
    # no position of its own: containment in it is decided by its elements, not by the call's span
    target = ast.Tuple(elts=[value for _, value in arguments], ctx=ast.Load())
    return BackwardCall(call, target, "call")


def fed_parameters(callee: Scope) -> Optional[frozenset[str]]:
    """Parameters whose values the callee's every-call backward walks with their graph; None if
    the callee does not surely backpropagate once per call."""
    ctx = callee.ctx
    if ctx is None:
        return None
    return ctx.memo(("fed_parameters", id(callee.node)), lambda: _fed(ctx, callee))


def periodic_parameter(callee: Scope) -> Optional[tuple[str, ast.expr]]:
    """(parameter, k) when the callee's backward runs under ``if param % k == 0:`` (every k-th
    call, when the caller passes its loop's counter); None when it runs on every call."""
    ctx = callee.ctx
    if ctx is None or fed_parameters(callee) is None:
        return None

    def compute() -> Optional[tuple[str, ast.expr]]:
        calls = backward_calls(ctx, callee)
        if any(always_runs(ctx, c.node, callee.node) and not enclosing_loops(ctx, ctx.statement_of(c.node), callee) for c in calls):
            return None  # some backward runs on every call
        return next((g for c in calls if (g := _parameter_guard(ctx, callee, c)) is not None), None)

    return ctx.memo(("periodic_parameter", id(callee.node)), compute)


def _parameter_guard(ctx: FileContext, callee: Scope, call: BackwardCall) -> Optional[tuple[str, ast.expr]]:
    """``if step % k == 0:`` (no ``else``), a statement of the function's own body, around a
    backward that runs whenever its body does; ``step`` a parameter, nothing the function binds
    in the test."""
    guard = next((a for a in ctx.ancestors(call.node) if isinstance(a, ast.If)), None)
    if guard is None or guard.orelse or not any(guard is s for s in callee.node.body) or not always_runs(ctx, call.node, guard):
        return None
    params = set(parameters(callee))
    bound = {n.id for n in scope_nodes(callee) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    names = {n.id for n in ast.walk(guard.test) if isinstance(n, ast.Name)}
    periodic = [
        n for n in ast.walk(guard.test)
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Mod, ast.FloorDiv, ast.BitAnd)) and isinstance(n.left, ast.Name) and n.left.id in params
    ]
    if len(periodic) != 1 or names & bound or (names & params) != {periodic[0].left.id}:
        return None
    return periodic[0].left.id, periodic[0].right


def _counts_passes(ctx: FileContext, scope: Scope, call: ast.Call, callee: Scope, guard: tuple[str, ast.expr]) -> bool:
    """The call gives the guard's parameter the counter of the loop around it (``for step in
    range(n)``, ``for step, batch in enumerate(loader)``), which runs more than k passes."""
    param, k = guard
    argument = dict(bound_arguments(callee, call)).get(param)
    loops = enclosing_loops(ctx, ctx.statement_of(call), scope)
    if not isinstance(argument, ast.Name) or not loops or not isinstance(loops[0], (ast.For, ast.AsyncFor)):
        return False
    loop = loops[0]
    target = loop.target.elts[0] if isinstance(loop.target, ast.Tuple) and loop.target.elts else loop.target
    if not (isinstance(target, ast.Name) and target.id == argument.id):
        return False
    iterated = loop.iter
    if isinstance(iterated, ast.Call) and getattr(iterated.func, "id", "") == "enumerate":
        return isinstance(loop.target, ast.Tuple)  # (the first element is the counter)
    if not (isinstance(iterated, ast.Call) and getattr(iterated.func, "id", "") == "range" and iterated.args):
        return False
    count = iterated.args[-1] if len(iterated.args) == 1 else None
    if isinstance(count, ast.Constant) and isinstance(k, ast.Constant) and isinstance(count.value, int) and isinstance(k.value, int):
        return count.value > k.value
    return True


def _fed(ctx: FileContext, callee: Scope) -> Optional[frozenset[str]]:
    calls = backward_calls(ctx, callee)
    every = [
        c for c in calls
        if c.kind in ("method", "autograd.backward", "owner", "scaler") and frees_graph(c)
        and not enclosing_loops(ctx, ctx.statement_of(c.node), callee)
        and (always_runs(ctx, c.node, callee.node) or _parameter_guard(ctx, callee, c) is not None)
    ]
    if any(c.kind == "autograd.grad" and frees_graph(c) for c in calls):
        return None  # (one that keeps its graph, create_graph=True, leaves it to the backward)
    if every:
        return _fed_by(ctx, callee, every[0])
    # one backward in each branch of an if/else: one runs on every call; a parameter is fed when each walks it
    every = [c for c in calls if runs_on_every_pass(ctx, ctx.statement_of(c.node), callee.node, [o.node for o in calls])]
    if len(every) < 2 or any(not frees_graph(c) or c.kind not in ("method", "autograd.backward") for c in every):
        return None
    return frozenset.intersection(*(_fed_by(ctx, callee, c) for c in every))


def _fed_by(ctx: FileContext, callee: Scope, backward: BackwardCall) -> frozenset[str]:
    stmt = ctx.statement_of(backward.node)
    feeding = Feeding(ctx, callee.node.body, backward.target, stmt)
    nodes = [n for n in scope_nodes(callee) if hasattr(n, "lineno") and position(n) <= end_position(stmt)]
    flowing = Feeding(ctx, callee.node.body, backward.target, stmt, names=_graph_names(ctx)).live
    fed = set()
    for name in parameters(callee):
        if name in feeding.live and name in flowing and _flows_unchanged(ctx, callee, nodes, name, feeding):
            fed.add(name)
    return frozenset(fed)


def _graph_names(ctx: FileContext) -> Callable[[ast.expr], set[str]]:
    """The names a graph flows from in an expression (``flowing_nodes``: not under ``.detach()``,
    nor through arguments a readable helper does not return from)."""
    return lambda expr: {n for node in flowing_nodes(ctx, expr) if isinstance(node, (ast.Name, ast.Attribute)) and (n := dotted(node))}


def _flows_unchanged(ctx: FileContext, callee: Scope, nodes: list[ast.AST], name: str, feeding: Feeding) -> bool:
    """The parameter's first use feeds the loss before any rebinding, and no use cuts it: a
    detaching method on it, or a rebinding of it to a value with no graph computed from it
    (``state = tuple(h.detach() for h in state)``, ``h = repackage_hidden(h)``)."""
    loads = sorted((n for n in nodes if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)), key=position)
    defaults = [g for n in loads if (g := _default_test(ctx, n)) is not None]
    loads = [n for n in loads if not any(g.test.left is n for g in defaults)]
    stores = [ctx.statement_of(n) for n in nodes if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) and not _when_none(ctx, n, defaults)]
    if not loads or any(end_position(s) <= position(loads[0]) for s in stores) or not feeding.reaches(loads[0]):
        return False
    graph = facts(ctx, callee)
    for load in loads:
        parent = ctx.parent(load)
        if isinstance(parent, ast.Attribute) and parent.attr in CUT_METHODS:
            return False
        stmt = ctx.statement_of(load)
        value = getattr(stmt, "value", None)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and value is not None and name in statement_effect(stmt)[0]:
            if graph.kind(value, stmt) == Kind.NONE:
                return False  # the parameter is rebound to what it computes without a graph: a cut
    return True


def _default_test(ctx: FileContext, load: ast.Name) -> Optional[ast.If]:
    """``if state is None: state = ...``: the ``if`` whose test reads ``load`` only to fill in a
    default (its body rebinds the name). The test is no use of the value: a given value flows on
    unchanged, and the body runs only when the caller passed None, which carries no graph."""
    test = ctx.parent(load)
    guard = ctx.parent(test)
    if not (isinstance(test, ast.Compare) and test.left is load and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is)):
        return None
    if not (isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None):
        return None
    if not (isinstance(guard, ast.If) and guard.test is test):
        return None
    stores = [n for s in guard.body for n in ast.walk(s) if isinstance(n, ast.Name) and n.id == load.id and isinstance(n.ctx, ast.Store)]
    return guard if stores else None


def _when_none(ctx: FileContext, store: ast.Name, defaults: list[ast.If]) -> bool:
    return any(contains(s, store) for guard in defaults for s in guard.body)
