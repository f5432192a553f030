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
from typing import Iterator

from fixer.analysis.call_events import Event
from fixer.analysis.early_steps import early_steps
from fixer.analysis.passes import guarded_statement, movable_across, same_guard
from fixer.analysis.protocol import is_update_companion
from fixer.analysis.statement_moves import movable, statement_lines
from fixer.context import FileContext
from fixer.rule import Applicability, Diagnostic, Edit, Rule

GRADIENT_PREPARATION = ("clip_grad", "unscale_")


class StepBeforeBackward(Rule):
    code = "GF202"
    name = "step-before-backward"
    summary = "optimizer.step() before loss.backward() applies stale or cleared gradients"
    fix_safety = "unsafe"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for found in early_steps(ctx):
            yield self._report(ctx, found.block, found.step, found.backward, found.cleared)

    def _report(self, ctx: FileContext, block: list[ast.stmt], step: Event, backward: Event, cleared: bool) -> Diagnostic:
        step_text, backward_text = ctx.text(step.call), ctx.text(backward.call)
        why = "gradients `zero_grad()` just cleared" if cleared else "the previous iteration's gradients (none at the first)"
        message = (
            f"`{step_text}` runs before `{backward_text}`: it applies {why}, and this iteration's gradients "
            f"come one step late; step after the backward"
        )
        last = step.index
        while last + 1 < backward.index and is_update_companion(ctx, guarded_statement(ctx, block[last + 1])) and same_guard(ctx, block[step.index], block[last + 1]):
            last += 1
        after = backward.index
        while after + 1 < len(block) and _prepares_gradients(ctx, block[after + 1]):
            after += 1
        owner = ctx.parent(block[step.index])
        edits: list[Edit] = []
        moved = block[step.index : last + 1]
        crossed = block[last + 1 : after + 1]
        if all(movable(ctx, s, owner) and movable_across(ctx, s, crossed) for s in moved) and movable(ctx, block[after], owner):
            start, end = statement_lines(ctx, block[step.index], block[last])
            at = ctx.line_end(block[after].end_lineno)
            text = ctx.source[start:end]
            prefix = "" if ctx.source[:at].endswith(("\n", "\r")) else ctx.newline
            edits = [Edit(start, end, ""), Edit(at, at, prefix + text)]
        return self.diagnostic(ctx, step.call, message, edits, Applicability.UNSAFE, title=f"Move `{step_text}` after `{backward_text}`")


def _prepares_gradients(ctx: FileContext, stmt: ast.stmt) -> bool:
    text = ctx.text(stmt)
    return any(word in text for word in GRADIENT_PREPARATION)
