"""## What it does
Finds `optimizer.step()` that runs before the iteration's `loss.backward()` in the same
straight-line block: either right after `zero_grad()` (the step sees cleared gradients), or at the
top of a training loop body with no backward before it in the iteration or before the loop, or at
the top of a step function (or method) that this file calls only inside loops.

## Why is this bad?
`step()` updates the parameters from whatever `.grad` holds at that moment. Before the
backward, that is nothing (after `zero_grad()`, or at the first iteration) or the previous
iteration's gradients: every update comes one iteration late, from parameters that have moved
since, and the last backward is never applied. After `zero_grad()` the model does not learn at all.

## Example
```python
for inputs, targets in loader:
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    optimizer.step()
    loss.backward()
```

## Use instead
```python
for inputs, targets in loader:
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.step()
```
The fix moves the `step()` line (with its comments, and a `scaler.update()` or `scheduler.step()`
that directly follows it) to just after the backward call, after any gradient clipping or
`scaler.unscale_()` that follows the backward.

## Fix safety
Unsafe. The fix changes training on purpose: each `step()` now applies the gradients of its own
iteration's backward, so every parameter the optimizer owns ends with different values, and the
forward pass that used to run on freshly stepped parameters now runs before the step (logged
losses change too). The moved call crosses the forward pass, whose module code the analysis does
not see.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.calls import backward_calls
from fixer.analysis.passes import loop_of_pass
from fixer.analysis.call_events import Event, block_events
from fixer.analysis.protocol import (
    call_loops,
    blocks,
    is_loop_body,
    is_plain_step,
    is_update_companion,
    optimizer_params,
    optimizer_scopes,
    touches_grads,
    zeroes_for,
)
from fixer.analysis.statement_moves import movable, statement_lines
from fixer.analysis.scopes import Scope
from fixer.context import FileContext
from fixer.rule import Applicability, Diagnostic, Edit, Rule

GRADIENT_PREPARATION = ("clip_grad", "unscale_")


class StepBeforeBackward(Rule):
    code = "GF202"
    name = "step-before-backward"
    summary = "optimizer.step() before loss.backward() applies stale or cleared gradients"
    fix_safety = "unsafe"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in optimizer_scopes(ctx):
            for block in blocks(scope):
                yield from self._check_block(ctx, scope, block)

    def _check_block(self, ctx: FileContext, scope: Scope, block: list[ast.stmt]) -> Iterator[Diagnostic]:
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
            yield self._report(ctx, block, step, backward, cleared)

    def _report(self, ctx: FileContext, block: list[ast.stmt], step: Event, backward: Event, cleared: bool) -> Diagnostic:
        step_text, backward_text = ctx.text(step.call), ctx.text(backward.call)
        why = "gradients `zero_grad()` just cleared" if cleared else "the previous iteration's gradients (none at the first)"
        message = (
            f"`{step_text}` runs before `{backward_text}`: it applies {why}, and this iteration's gradients "
            f"come one step late; step after the backward"
        )
        last = step.index
        while last + 1 < backward.index and is_update_companion(block[last + 1]):
            last += 1
        after = backward.index
        while after + 1 < len(block) and _prepares_gradients(ctx, block[after + 1]):
            after += 1
        owner = ctx.parent(block[step.index])
        edits: list[Edit] = []
        if all(movable(ctx, stmt, owner) for stmt in block[step.index : last + 1]) and movable(ctx, block[after], owner):
            start, end = statement_lines(ctx, block[step.index], block[last])
            at = ctx.line_end(block[after].end_lineno)
            text = ctx.source[start:end]
            prefix = "" if ctx.source[:at].endswith(("\n", "\r")) else ctx.newline
            edits = [Edit(start, end, ""), Edit(at, at, prefix + text)]
        return self.diagnostic(ctx, step.call, message, edits, Applicability.UNSAFE, title=f"Move `{step_text}` after `{backward_text}`")



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


def _prepares_gradients(ctx: FileContext, stmt: ast.stmt) -> bool:
    text = ctx.text(stmt)
    return any(word in text for word in GRADIENT_PREPARATION)
