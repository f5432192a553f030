"""Optimizer steps whose gradients nothing clears (GF203's findings): a step of a loop that
backpropagates on every pass (``loop_steps``), a function that backpropagates and steps, called
only inside loops that clear nothing (``step_function_step``), and an ``optimizer.step(closure)``
whose closure backpropagates without clearing (``closure_steps``). Whether a reset may happen out
of sight is ``gradient_resets``'s answer; events through calls are ``call_events``'s."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.arguments import bound_arguments
from fixer.analysis.call_events import Event, block_events, resolved_callee, skipped_on_call
from fixer.analysis.calls import OptimizerCall, optimizer_call, optimizer_calls
from fixer.analysis.gradient_resets import mentions_other_reset, resets_in_scope, zeroed_in_loop
from fixer.analysis.passes import pass_body
from fixer.analysis.protocol import call_loops, is_plain_step, optimizer_scopes, zeroes_for
from fixer.analysis.recurring import runs_on_many_iterations
from fixer.analysis.scopes import LOOPS, Scope, scope_nodes
from fixer.analysis.statement_moves import is_docstring
from fixer.analysis.step_closures import backpropagates_plainly, built_by_torch, closure_of
from fixer.context import FileContext
from fixer.nodes import walk


def loop_steps(ctx: FileContext, scope: Scope, loop: ast.AST) -> Iterator[tuple[Event, bool]]:
    """Each optimizer's first step after a backward on every pass with no reset of its gradients
    in the loop, and whether a backward runs before it at the same call level."""
    events = block_events(ctx, scope, pass_body(loop), through_calls=True)
    backwards = [e for e in events if e.kind == "backward"]
    if not backwards or any(e.spelling == "owner" for e in backwards):
        return  # accelerator / fabric / lightning / deepspeed manage gradients themselves
    first_backward = min(e.index for e in backwards if not e.conditional) if any(not e.conditional for e in backwards) else None
    if first_backward is None:
        return
    reported: set[str] = set()
    for step in events:
        if step.kind != "step" or step.owner in reported or step.index < first_backward:
            continue
        if step.conditional and not _on_many_passes(ctx, scope, loop, step):
            continue  # may run once per loop (or its guard says nothing)
        if not is_plain_step(step) or zeroed_in_loop(ctx, scope, loop, step.owner):
            continue
        if any(e.kind == "zero_grad" and e.via is not None and zeroes_for(ctx, e.owner or "", step.owner) is not False for e in events):
            continue  # a function the loop calls clears them (maybe one its callee calls)
        reported.add(step.owner)
        yield step, any(e.kind == "backward" and e.via is step.via and not e.conditional for e in events[: events.index(step)])


def step_function_step(ctx: FileContext, scope: Scope) -> Optional[tuple[Event, bool]]:
    """A function (or method) that backpropagates and steps (maybe under a guard that holds on many
    calls), called by the project only inside loops that clear no gradient (nor call anything that
    might): its step, and whether every
    calling loop is in this file. Each call is one iteration, and nothing ever clears the
    gradients it steps with."""
    if isinstance(scope.node, ast.Module) or any(isinstance(n, LOOPS) for n in scope_nodes(scope)):
        return None
    events = block_events(ctx, scope, scope.node.body, through_calls=True)
    backwards = [e for e in events if e.kind == "backward"]
    if not backwards or any(e.spelling == "owner" or e.conditional for e in backwards) or any(e.kind == "zero_grad" for e in events):
        return None
    steps = [e for e in events if e.kind == "step" and e.index > backwards[0].index and is_plain_step(e) and _on_many_calls(ctx, scope, e)]
    if len(steps) != 1 or steps[0].via is not None or zeroed_in_loop(ctx, scope, scope.node, steps[0].owner):
        return None
    loops = call_loops(ctx, scope)
    if loops is None or any(id(caller.node) in _optimizer_scope_ids(own) for own, caller, _ in loops):
        return None  # a caller's loop that shows optimizer calls is checked, with this call, as a loop
    step = steps[0]
    for own, caller, loop in loops:  # a zero_grad of another optimizer (opt_E for opt_D) clears none of these
        events = block_events(own, caller, pass_body(loop), through_calls=True)
        if any(e.kind == "zero_grad" and zeroes_for(own, e.owner or "", step.owner) is not False for e in events) or mentions_other_reset(own, loop):
            return None
    return step, all(own is ctx for own, _, _ in loops)


def _on_many_passes(ctx: FileContext, scope: Scope, loop: ast.AST, step: Event) -> bool:
    """A conditional step provably may run on many passes of the loop: its guards in the loop hold
    on many (``recurring``), and so do, for a step inside a function the loop calls
    (``train_step(...)``), the call's guards and the step's own guards in that function."""
    if step.via is None:
        return runs_on_many_iterations(ctx, step.call, loop)
    callee = resolved_callee(ctx, scope, step.via)
    home = callee.ctx or ctx if callee is not None else None
    return home is not None and runs_on_many_iterations(ctx, ctx.statement_of(step.via), loop) and _on_many_calls(home, callee, step)


def _on_many_calls(ctx: FileContext, scope: Scope, step: Event) -> bool:
    """The step runs on every call, or under guards that hold on many (``if torch.isfinite(norm):``,
    as a loop's pass would: ``recurring``), each call being one pass of its caller's loop."""
    return not step.conditional or runs_on_many_iterations(ctx, step.call, scope.node)


def closure_steps(ctx: FileContext, scope: Scope) -> Iterator[tuple[Scope, OptimizerCall]]:
    """``optimizer.step(closure)`` whose closure backpropagates but never clears the gradients:
    LBFGS evaluates the closure several times per step, each backward adds to the last."""
    for call in optimizer_calls(ctx, scope):
        if call.kind != "step" or call.via_scaler:
            continue
        closure = closure_of(ctx, scope, call.node)
        if closure is None or not backpropagates_plainly(ctx, closure) or not built_by_torch(ctx, call.owner):
            continue  # SAM-style wrappers zero the gradients inside step() themselves
        loop = next((a for a in ctx.ancestors(call.node) if isinstance(a, LOOPS) or a is scope.node), scope.node)
        region = loop if loop is not scope.node else closure.node
        if zeroed_in_loop(ctx, closure, closure.node, call.owner) or zeroed_in_loop(ctx, scope, region, call.owner):
            continue
        if loop is scope.node and resets_in_scope(ctx, scope, call.owner):
            continue
        yield closure, call


def _optimizer_scope_ids(ctx: FileContext) -> frozenset[int]:
    """The scopes the rule checks (``optimizer_scopes``), by node, computed once per file."""
    return ctx.memo("missing_zero_grad_scopes", lambda: frozenset(id(s.node) for s in optimizer_scopes(ctx)))


def step_function_top(ctx: FileContext, scope: Scope, step: Event) -> Optional[tuple[ast.stmt, str]]:
    """(first statement, owner of the step) of the function of this file the loop calls, which
    runs the backward and the step itself."""
    callee = resolved_callee(ctx, scope, step.via)
    inner = optimizer_call(ctx, step.call) if callee is not None and (callee.ctx or ctx) is ctx else None
    if inner is None or not any(step.call is n for n in walk(callee.node)):
        return None  # the step is in a helper of the helper: zero in the loop
    body = callee.node.body
    first = body[1] if is_docstring(body[0]) and len(body) > 1 else body[0]
    return (first, inner.owner) if first.lineno > callee.node.lineno else None


def skipped_reset_flag(ctx: FileContext, scope: Scope, step: Event) -> Optional[tuple[str, ast.expr]]:
    """(flag, what the call passes for it: its constant, or the call itself) where the function
    the loop calls to step (``self.optimizer_step()``) would clear that optimizer's gradients
    after its step under ``if flag:``, and this call leaves the flag off."""
    callee = resolved_callee(ctx, scope, step.via) if step.via is not None else None
    home = callee.ctx or ctx if callee is not None else None
    inner = optimizer_call(home, step.call) if home is not None else None
    if inner is None:
        return None
    for reset in optimizer_calls(home, callee):
        guard = home.parent(home.statement_of(reset.node))
        if reset.kind != "zero_grad" or reset.owner != inner.owner or not isinstance(guard, ast.If) or guard.orelse:
            continue
        flag = guard.test.id if isinstance(guard.test, ast.Name) else None
        if flag and home.parent(guard) is callee.node and skipped_on_call(home, callee, step.via, reset.node):
            given = dict(bound_arguments(callee, step.via)).get(flag)
            return flag, given if given is not None else step.via
    return None
