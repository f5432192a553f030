"""Optimizer steps that run before the backward of their own iteration (GF202's query): in a
straight-line block, a plain ``step()`` with no backward since the last other optimizer's step,
right after a ``zero_grad()`` of its parameters or at the top of a block that runs once per
training iteration (a loop's pass, or a step function this file calls only inside loops) and not
primed by a backward before the loop; followed by the iteration's backward with nothing touching
``.grad`` between. ``early_step_lines`` is the fact GF201 defers to: there the cause is the step's
position, not the ``zero_grad()``."""

from __future__ import annotations

import ast
from typing import Iterator, NamedTuple, Optional

from fixer.analysis.calls import backward_calls
from fixer.analysis.passes import loop_of_pass
from fixer.analysis.call_events import Event, block_events
from fixer.analysis.protocol import (
    call_loops,
    blocks,
    is_loop_body,
    is_plain_step,
    optimizer_params,
    optimizer_scopes,
    touches_grads,
    zeroes_for,
)
from fixer.analysis.scopes import Scope
from fixer.context import FileContext


class EarlyStep(NamedTuple):
    """``step`` runs before ``backward`` in ``block``; ``cleared``: a ``zero_grad()`` of its
    parameters runs just before it (it applies nothing at all)."""

    block: list[ast.stmt]
    step: Event
    backward: Event
    cleared: bool


def early_steps(ctx: FileContext) -> Iterator[EarlyStep]:
    """GF202's findings in the file, in order."""
    for scope in optimizer_scopes(ctx):
        for block in blocks(scope):
            yield from _early_steps_in(ctx, scope, block)


def early_step_lines(ctx: FileContext) -> set[int]:
    """The lines of the steps GF202 reports, computed once per file."""
    return ctx.memo("gf202_lines", lambda: {found.step.call.lineno for found in early_steps(ctx)})


def _early_steps_in(ctx: FileContext, scope: Scope, block: list[ast.stmt]) -> Iterator[EarlyStep]:
    events = block_events(ctx, scope, block)
    for step in events:
        if step.kind != "step" or not step.direct or step.conditional or not is_plain_step(step):
            continue
        earlier = _since_last_update(events, step)
        if any(e.kind == "backward" for e in earlier):
            continue  # the step applies this iteration's earlier backward
        cleared = any(e.kind == "zero_grad" and zeroes_for(ctx, e.owner, step.owner) is True for e in earlier)
        if not cleared and not _each_pass(ctx, scope, block):
            continue
        backward = _last_backward(events, step)
        if backward is None:
            continue
        objects = {step.owner} | set(optimizer_params(ctx).get(step.owner) or ())
        if any(touches_grads(ctx, stmt, objects) for stmt in block[step.index + 1 : backward.index]):
            continue
        yield EarlyStep(block, step, backward, cleared)


def _since_last_update(events: list[Event], step: Event) -> list[Event]:
    """Events before ``step`` and after the last other optimizer's step (a GAN's discriminator
    update consumes the backward before it)."""
    earlier: list[Event] = []
    for event in events:
        if event.index >= step.index:
            break
        earlier = [] if event.kind == "step" and event.owner != step.owner else earlier + [event]
    return earlier


def _last_backward(events: list[Event], step: Event) -> Optional[Event]:
    """The last plain backward after ``step``, if no other step follows the step and no
    zero_grad follows the backward (``step(); zero_grad(); ...; backward()`` is the shifted loop)."""
    found = None
    for event in events:
        if event.index <= step.index:
            continue
        if event.kind == "step" or event.kind == "zero_grad" and found is not None:
            return None  # another update later in the block: order unclear
        if event.kind == "zero_grad":
            continue
        if event.conditional or event.spelling == "owner":
            return None
        found = event
    return found


def _each_pass(ctx: FileContext, scope: Scope, block: list[ast.stmt]) -> bool:
    """``block`` runs once per training iteration, not primed by a backward before: a loop's pass,
    or the body of a step function (or method) that this file calls only inside loops."""
    if is_loop_body(ctx, block):
        return not _primed(ctx, scope, block)
    if block is not getattr(scope.node, "body", None):
        return False
    loops = call_loops(ctx, scope)
    return loops is not None and not any(_primed_at(own, caller, loop) for own, caller, loop in loops)


def _primed(ctx: FileContext, scope: Scope, block: list[ast.stmt]) -> bool:
    """A backward before the loop (``loss.backward()`` then ``for ...: step(); ...; backward()``)
    makes the step-first order deliberate: each step applies the gradient computed just before."""
    return _primed_at(ctx, scope, loop_of_pass(ctx, block))


def _primed_at(ctx: FileContext, scope: Scope, loop: ast.AST) -> bool:
    return any(
        call.node.lineno < loop.lineno and not any(parent is loop for parent in ctx.ancestors(call.node))
        for call in backward_calls(ctx, scope)
    )
