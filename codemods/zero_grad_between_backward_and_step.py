"""## What it does
Finds `optimizer.zero_grad()` (or `model.zero_grad()` on a model whose parameters the optimizer
updates) that runs after `loss.backward()` (or Lightning's `self.manual_backward(loss)`) and
before that optimizer's `step()`, in the same straight-line block (the backward may run in a
function of the project the block calls, or under a condition or in a loop: when it ran, the
zero_grad wipes its gradients, and when it did not, clearing achieves nothing); and gradient accumulation
whose `zero_grad()` runs every batch while the `step()` runs only under `if (i + 1) % k == 0:`,
so each batch's zero_grad lands between the previous backward and the step (also when it is
written at the end of the loop body, after the guarded step: it runs before the next batch's).

## Why is this bad?
`backward()` fills `.grad`, `zero_grad()` clears it again, and `step()` then sees no gradients:
with the default `set_to_none=True` the parameters are skipped entirely, with zeros only weight
decay and momentum move them. The model does not learn, and nothing raises. In the accumulation
form every step applies only the last batch's gradient: the other backward passes are wasted.

## Example
```python
for inputs, targets in loader:
    loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
```

## Use instead
```python
for inputs, targets in loader:
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.step()
```
The fix moves the `zero_grad()` line (with its comments) to the start of the iteration's
forward pass: the top of the block, or just after the previous optimizer step or zero_grad in it
(so a GAN's discriminator update keeps its own order, and after `opt = self.optimizers()`), and
before every backward whose gradients the step should use. In the accumulation form it moves the `zero_grad()` to just after the
guarded `step()`. Left alone: a step guarded by any other condition (`if torch.isfinite(loss):`),
and `accelerator.backward` (its wrapped optimizer skips zero_grad while accumulating).

## Fix safety
Unsafe. The fix changes training on purpose: every `step()` now applies the gradients of the
iteration's backward instead of none, so all parameters the optimizer owns change differently,
and after the loop `.grad` holds the last iteration's gradients instead of None (or zeros). The
moved call crosses the forward pass, whose module code the analysis does not see. In the
accumulation form each step now applies the sum of the k batches' gradients, and after the loop
`.grad` holds the gradients accumulated since the last step.
"""

from __future__ import annotations

import ast
from typing import Iterator

from fixer.analysis.call_events import Event
from fixer.analysis.passes import guarded_statement, movable_across
from fixer.analysis.statement_moves import attached_start, movable, statement_lines
from fixer.analysis.wiped_gradients import insertion_index, wiping_zero_grads
from fixer.context import FileContext
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class ZeroGradBetweenBackwardAndStep(Rule):
    code = "GF201"
    name = "zero-grad-between-backward-and-step"
    summary = "zero_grad() between backward() and step() wipes the gradients the step needs"
    fix_safety = "unsafe"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for found in wiping_zero_grads(ctx):
            if found.guard is not None:
                yield self._report_accumulation(ctx, found.block, found.zero, found.step, found.guard)
            else:
                yield self._report(ctx, found.block, found.events, found.zero, found.step, found.backward, found.objects)

    def _report_accumulation(self, ctx: FileContext, block: list[ast.stmt], zero: Event, step: Event, guard: ast.If) -> Diagnostic:
        zero_text, step_text = ctx.text(zero.call), ctx.text(step.call)
        message = (
            f"`{zero_text}` runs for every batch but `{step_text}` only when `{ctx.text(guard.test)}`: it wipes the "
            f"accumulated gradients, so each step applies the last batch's gradient only; zero the gradients "
            f"right after the step"
        )
        statement = block[zero.index]  # the call's statement, or the shared guard holding only it
        inner = guarded_statement(ctx, statement)  # what moves under the step's guard (same test)
        holder = next(s for s in guard.body if isinstance(s, ast.Expr) and s.value is step.call)
        edits: list[Edit] = []
        if movable(ctx, statement, ctx.parent(statement)) and movable(ctx, inner, ctx.parent(inner)) and movable(ctx, holder, guard):
            start, end = statement_lines(ctx, statement, statement)
            at = ctx.line_end(holder.end_lineno)
            prefix = "" if ctx.source[:at].endswith(("\n", "\r")) else ctx.newline
            text = ctx.indent_of(holder.lineno) + ctx.source[slice(*statement_lines(ctx, inner, inner))].lstrip(" \t")
            edits = [Edit(start, end, ""), Edit(at, at, prefix + text)]
        return self.diagnostic(
            ctx, zero.call, message, edits, Applicability.UNSAFE, title=f"Move `{zero_text}` after `{step_text}`"
        )

    def _report(self, ctx, block, events, zero: Event, step: Event, backward: Event, objects: set) -> Diagnostic:
        statement = block[zero.index]
        zero_text, step_text = ctx.text(zero.call), ctx.text(step.call)
        message = (
            f"`{zero_text}` runs after `{ctx.text(backward.call)}` and before `{step_text}`: the step sees no "
            f"gradients and the parameters do not learn; zero the gradients before the forward pass"
        )
        target = insertion_index(ctx, block, events, backward, objects, zero.owner)
        owner = ctx.parent(statement)
        edits: list[Edit] = []
        while target is not None and target <= backward.index and not movable_across(ctx, statement, block[target : zero.index]):
            target += 1  # a guarded zero_grad stays after what rebinds its test's names
        if target is not None and target <= backward.index and movable(ctx, statement, owner) and movable(ctx, block[target], owner):
            start, end = statement_lines(ctx, statement, statement)
            at = attached_start(ctx, block[target])
            edits = [Edit(at, at, ctx.source[start:end]), Edit(start, end, "")]
        return self.diagnostic(
            ctx, zero.call, message, edits, Applicability.UNSAFE, title=f"Move `{zero_text}` before the forward pass"
        )
