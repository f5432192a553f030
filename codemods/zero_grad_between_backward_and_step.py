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
from typing import Iterator, Optional

from fixer.analysis.passes import is_pass_filter
from fixer.analysis.call_events import Event, block_events
from fixer.analysis.protocol import (
    blocks,
    is_loop_body,
    is_plain_step,
    optimizer_params,
    optimizer_scopes,
    touches_grads,
    zeroes_for,
)
from fixer.analysis.statement_moves import attached_start, is_docstring, movable, statement_lines
from fixer.analysis.scopes import Scope
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class ZeroGradBetweenBackwardAndStep(Rule):
    code = "GF201"
    name = "zero-grad-between-backward-and-step"
    summary = "zero_grad() between backward() and step() wipes the gradients the step needs"
    fix_safety = "unsafe"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in optimizer_scopes(ctx):
            for block in blocks(scope):
                yield from self._check_block(ctx, scope, block)

    def _check_block(self, ctx: FileContext, scope: Scope, block: list[ast.stmt]) -> Iterator[Diagnostic]:
        yield from self._check_accumulation(ctx, block, block_events(ctx, scope, block))
        events = block_events(ctx, scope, block, through_calls=True)  # a helper's backward fills .grad too
        for zero in events:
            if zero.kind != "zero_grad" or not zero.direct or zero.call.args or _keyword_other_than_set_to_none(zero.call):
                continue
            step = _next_step(ctx, events, zero)
            backward = _previous_backward(events, zero, step)
            if step is None or backward is None or not is_plain_step(step) or step.call.lineno in _steps_before_backward(ctx):
                continue  # step(closure) runs its own backward; GF202: the step comes before its own backward
            objects = {step.owner, zero.owner} | set(optimizer_params(ctx).get(step.owner) or ())
            between = block[backward.index + 1 : step.index]
            if any(touches_grads(ctx, stmt, objects) for stmt in between if stmt is not block[zero.index]):
                continue  # gradients saved or rewritten around the zero_grad: maybe on purpose
            yield self._report(ctx, block, events, zero, step, backward, objects)

    def _check_accumulation(self, ctx: FileContext, block: list[ast.stmt], events: list[Event]) -> Iterator[Diagnostic]:
        """``zero_grad(); loss.backward(); if (i + 1) % k == 0: step()`` run once per batch: the
        zero_grad of the next batch lands between this backward and the step that accumulates. In
        a loop's body what comes before the zero_grad also comes after it, in the next pass
        (``loss.backward(); if ...: step()`` then ``zero_grad()`` at the end of the body)."""
        cyclic = is_loop_body(ctx, block)
        for zero in events:
            if zero.kind != "zero_grad" or not zero.direct or zero.conditional or zero.call.args or _keyword_other_than_set_to_none(zero.call):
                continue
            later = [e for e in events if e.index > zero.index] + [e for e in events if cyclic and e.index < zero.index]
            if not any(e.kind == "step" and _accumulation_guard(block[e.index], e.call) and not is_pass_filter(ctx, block[e.index]) for e in later):
                continue  # cheap structural gate before any ownership analysis; a shared guard runs on every selected pass
            if not any(e.kind == "backward" and not e.conditional and _fills_grads_now(e) for e in later):
                continue
            if any(e.kind == "backward" and any(k.arg == "retain_graph" for k in e.call.keywords) for e in later):
                continue  # truncated backpropagation through time: each backward spans the window on purpose
            steps = [e for e in events if e.kind == "step" and zeroes_for(ctx, zero.owner, e.owner) is not False]
            zeros = [e for e in events if e.kind == "zero_grad" and e is not zero and zeroes_for(ctx, e.owner, zero.owner) is not False]
            if len(steps) != 1 or zeros or steps[0].index == zero.index or zeroes_for(ctx, zero.owner, steps[0].owner) is not True:
                continue
            if steps[0].index < zero.index and not cyclic:
                continue
            step = steps[0]
            guard = block[step.index]
            if not _accumulation_guard(guard, step.call) or not is_plain_step(step):
                continue
            first = min((e.index for e in later if e.kind == "backward" and e.index < step.index), default=None)
            if first is None or any(e.kind == "backward" and e.index == step.index for e in events):
                continue  # the guard backpropagates before its step: the step uses that, not an accumulated sum
            objects = {step.owner, zero.owner} | set(optimizer_params(ctx).get(step.owner) or ())
            if any(touches_grads(ctx, stmt, objects) for stmt in block[first + 1 : step.index] if stmt is not block[zero.index]):
                continue
            yield self._report_accumulation(ctx, block, zero, step, guard)

    def _report_accumulation(self, ctx: FileContext, block: list[ast.stmt], zero: Event, step: Event, guard: ast.If) -> Diagnostic:
        zero_text, step_text = ctx.text(zero.call), ctx.text(step.call)
        message = (
            f"`{zero_text}` runs for every batch but `{step_text}` only when `{ctx.text(guard.test)}`: it wipes the "
            f"accumulated gradients, so each step applies the last batch's gradient only; zero the gradients "
            f"right after the step"
        )
        statement = block[zero.index]
        holder = next(s for s in guard.body if isinstance(s, ast.Expr) and s.value is step.call)
        edits: list[Edit] = []
        if movable(ctx, statement, ctx.parent(statement)) and movable(ctx, holder, guard):
            start, end = statement_lines(ctx, statement, statement)
            at = ctx.line_end(holder.end_lineno)
            prefix = "" if ctx.source[:at].endswith(("\n", "\r")) else ctx.newline
            text = ctx.indent_of(holder.lineno) + ctx.source[start:end].lstrip(" \t")
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
        target = _insertion_index(ctx, block, events, backward, objects, zero.owner)
        owner = ctx.parent(statement)
        edits: list[Edit] = []
        if target is not None and movable(ctx, statement, owner) and movable(ctx, block[target], owner):
            start, end = statement_lines(ctx, statement, statement)
            at = attached_start(ctx, block[target])
            edits = [Edit(at, at, ctx.source[start:end]), Edit(start, end, "")]
        return self.diagnostic(
            ctx, zero.call, message, edits, Applicability.UNSAFE, title=f"Move `{zero_text}` before the forward pass"
        )


def _binds(stmt: ast.stmt, name: str) -> bool:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
    return any(isinstance(node, ast.Name) and node.id == name for target in targets for node in walk(target))


def _fills_grads_now(backward: Event) -> bool:
    """A backward whose gradients land in ``.grad`` at once: not ``accelerator.backward`` (whose
    wrapped optimizer skips zero_grad while accumulating), but Lightning's ``manual_backward``."""
    func = backward.call.func
    return backward.spelling != "owner" or isinstance(func, ast.Attribute) and func.attr == "manual_backward"


def _accumulation_guard(guard: ast.stmt, step: ast.Call) -> bool:
    """``if (i + 1) % k == 0: ... step()``: the step is in the body (no else) of an ``if`` whose test
    is a modulo compared with zero, directly as one of the body's statements."""
    if not isinstance(guard, ast.If) or guard.orelse:
        return False
    if not any(isinstance(s, ast.Expr) and s.value is step for s in guard.body):
        return False
    test = guard.test
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.left, ast.BinOp)
        and isinstance(test.left.op, ast.Mod)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == 0
    )


def _keyword_other_than_set_to_none(call: ast.Call) -> bool:
    return any(k.arg != "set_to_none" for k in call.keywords)


def _steps_before_backward(ctx: FileContext) -> set[int]:
    """Lines of the steps GF202 reports: there the real cause is the step's position."""
    from codemods.step_before_backward import StepBeforeBackward

    return ctx.memo("gf202_lines", lambda: {d.line for d in StepBeforeBackward().check(ctx)})


def _next_step(ctx: FileContext, events: list[Event], zero: Event) -> Optional[Event]:
    """The first step after ``zero`` that uses the gradients it clears, with no backward between."""
    for event in events:
        if event.index <= zero.index:
            continue
        if event.kind == "backward":
            return None
        if event.kind == "step":
            if event.conditional or zeroes_for(ctx, zero.owner, event.owner) is not True:
                return None
            return event
    return None


def _previous_backward(events: list[Event], zero: Event, step: Optional[Event]) -> Optional[Event]:
    """The last backward before ``zero`` with no step of the same optimizer between. One that may
    not run counts too: the zero_grad after it wipes its gradients when it ran, and clears nothing
    the step could use when it did not."""
    if step is None:
        return None
    found = None
    for event in events:
        if event.index >= zero.index:
            break
        if event.kind == "backward" and _fills_grads_now(event):
            found = event
        elif event.kind == "step" and event.owner == step.owner:
            found = None
    return found


def _insertion_index(
    ctx: FileContext, block: list[ast.stmt], events: list[Event], backward: Event, objects: set, owner: str
) -> Optional[int]:
    """Where the iteration's forward pass starts: walk up from the backward over statements without
    protocol events (and over earlier plain backward calls, whose gradients the step also uses);
    stop after a step or zero_grad. None when an earlier conditional backward makes it unclear."""
    index = backward.index
    while index > 0:
        above = [e for e in events if e.index == index - 1]
        if any(e.kind == "backward" and (e.conditional or not e.direct) for e in above):
            return None
        if any(e.kind != "backward" for e in above) or touches_grads(ctx, block[index - 1], objects):
            break
        if _binds(block[index - 1], owner.split(".", 1)[0]):
            break  # ``opt = self.optimizers()``: the zero_grad goes after the optimizer exists
        index -= 1
    if index == 0 and is_docstring(block[0]) and len(block) > 1:
        index = 1
    return index
