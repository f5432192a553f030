"""## What it does
Finds `optimizer.zero_grad()` (or `model.zero_grad()` on a model whose parameters the optimizer
updates) that runs after `loss.backward()` (or Lightning's `self.manual_backward(loss)`) and
before that optimizer's `step()`, in the same straight-line block (the backward may run in a
function of the project the block calls, or under a condition or in a loop: when it ran, the
zero_grad wipes its gradients, and when it did not, clearing achieves nothing); and gradient accumulation
whose `zero_grad()` runs every batch while the `step()` runs only under `if (i + 1) % k == 0:`,
so each batch's zero_grad lands between the previous backward and the step (also when it is
written at the end of the loop body, after the guarded step: it runs before the next batch's).
Also where more backward calls run between the `zero_grad()` and the step
(`a.backward(); opt.zero_grad(); b.backward(); opt.step()`): the step applies b's gradients only
and a's backward is wasted; only where a's backward is a statement of the block (not a helper that
may read its gradients) and no other step runs after it (a generator's step after the
discriminator's wanted what its backward left; the zero_grad between clears it from the
discriminator). Where the pass already starts with that zero_grad, the fix deletes the second.
And a `zero_grad()` in every pass of an inner loop that accumulates micro-batches (a `for`
loop, or a comprehension whose element calls a function of the project, such as
`sum(trainer.forward_backward(mb) for mb in micro_batches)`), before the pass's backward, while
the step of the same optimizer runs only after the loop (`fixer/analysis/repeated_zero_grads.py`);
not where the pass reads or writes `.grad` (per-sample gradients kept on purpose).

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
guarded `step()`; in the micro-batch form it takes the `zero_grad()` out of the pass and puts it
just after the step (in the function that steps, when that function and the one that clears are
each called from this one place). Left alone: a step guarded by any other condition (`if torch.isfinite(loss):`),
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
from typing import Iterator, Optional

from fixer.analysis.call_events import Event
from fixer.analysis.passes import guarded_statement, movable_across
from fixer.analysis.repeated_zero_grads import RepeatedZeroGrad, move_after_step, repeated_zero_grads, reported_call
from fixer.analysis.statement_moves import attached_start, movable, statement_lines
from fixer.analysis.wiped_gradients import already_zeroed, insertion_index, wiping_zero_grads
from fixer.context import FileContext
from fixer.edits.statements import delete_statement, insert_after
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class ZeroGradBetweenBackwardAndStep(Rule):
    code = "GF201"
    name = "zero-grad-between-backward-and-step"
    summary = "zero_grad() between backward() and step() wipes the gradients the step needs"
    fix_safety = "unsafe"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for repeated in repeated_zero_grads(ctx):
            yield self._report_repeated(ctx, repeated)
        for found in wiping_zero_grads(ctx):
            if found.guard is not None:
                yield self._report_accumulation(ctx, found.block, found.zero, found.step, found.guard)
            else:
                yield self._report(ctx, found.block, found.events, found.zero, found.step, found.backward, found.objects, found.refilled)

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

    def _report_repeated(self, ctx: FileContext, found: RepeatedZeroGrad) -> Diagnostic:
        zero, step = f"{found.zero.owner}.zero_grad()", ctx.text(found.step.site)
        at = reported_call(ctx, found)
        message = (
            f"`{zero}` runs in every pass of the loop at line {found.loop.lineno}, before that pass's backward, but "
            f"`{step}` only after the loop: each pass wipes the gradients the passes before it accumulated, so the "
            "step applies the last pass's gradient only; zero the gradients right after the step"
        )
        move = move_after_step(ctx, found)
        edits = []
        if move is not None and (taken := delete_statement(ctx, move.zero, keep_comment=False)) is not None:
            keywords = ", ".join(ctx.text(k) for k in found.zero.call.keywords)
            edits = [taken, insert_after(ctx, move.anchor, f"{move.receiver}.zero_grad({keywords})")]
        return self.diagnostic(ctx, at, message, edits, Applicability.UNSAFE, title=f"Move `{zero}` after `{step}`")

    def _report(self, ctx, block, events, zero: Event, step: Event, backward: Event, objects: set, refilled: Optional[Event]) -> Diagnostic:
        statement = block[zero.index]
        zero_text, step_text = ctx.text(zero.call), ctx.text(step.call)
        effect = "the step sees no gradients and the parameters do not learn"
        if refilled is not None:
            effect = f"the step applies the gradients of `{ctx.text(refilled.call)}` only and the first backward is wasted"
        message = (
            f"`{zero_text}` runs after `{ctx.text(backward.call)}` and before `{step_text}`: {effect}; zero the gradients "
            "before the forward pass"
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
            if already_zeroed(ctx, events, target, zero):
                edits = [Edit(start, end, "")]  # the pass already starts with that zero_grad: the second goes
        return self.diagnostic(
            ctx, zero.call, message, edits, Applicability.UNSAFE, title=f"Move `{zero_text}` before the forward pass"
        )
