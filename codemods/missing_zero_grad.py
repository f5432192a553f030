"""## What it does
Finds a training loop that calls `loss.backward()` and then `optimizer.step()` on every
iteration but never clears that optimizer's gradients: no `optimizer.zero_grad()` (nor
`model.zero_grad()`, nor `p.grad = None`) in the loop or in a function it calls; or a step
function (or method) that does both and that this file calls only inside loops that clear
nothing (`optimizer.zero_grad()` goes at its top). Also an `optimizer.step(closure)` (or
`step(self.loss_func)`) on a torch optimizer whose closure calls backward() but clears nothing.

## Why is this bad?
`backward()` adds to `.grad`; it does not overwrite it. Without zeroing, the gradient applied at
iteration *n* is the sum of the gradients of iterations 1..*n*: the updates grow with every
step, old batches keep pushing the parameters, and training diverges or stalls. LBFGS evaluates
its closure several times per step: without a zero_grad in it, each evaluation's gradient is
added to the previous ones and the line search follows a wrong direction.

## Example
```python
for inputs, targets in loader:
    loss = criterion(model(inputs), targets)
    loss.backward()
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
The fix inserts `optimizer.zero_grad()` at the top of the loop body, before the forward pass
(for a closure: at the top of the closure).

The backward and the step may run in a function the loop calls (`train_step(model, opt, x)`,
`trainer.step(batch)` on an instance of a class of this file, or a function imported from another
project file): its events count as the loop's, with its parameters read as the arguments passed.
When that function of this file runs the whole step (backward, then step), the fix clears the
gradients at its top instead.
A step under a guard that holds on many iterations (`if torch.isfinite(norm):`) counts as one
that runs every iteration. Left alone: gradient accumulation (the backward under a condition, a
step that may run once per loop as `if i == len(loader) - 1:` or under a flag, the step after the
loop), `optimizer.step(closure)`, loops that zero gradients in any spelling or pass the optimizer
or model to a helper that might, backward calls through wrappers that manage gradients themselves
(`accelerator.backward`, `self.manual_backward`, DeepSpeed engines), and closures passed to optimizers built outside `torch.optim` (SAM-style wrappers zero inside `step`).

## Fix safety
Unsafe. Every step now applies only its own iteration's gradient instead of the running sum, so
all parameters the optimizer owns train differently; after the loop `.grad` holds the last
iteration's gradient instead of the sum. Accumulating across the whole loop is rarely intended,
but the rule cannot prove it is not.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.call_events import Event, block_events, resolved_callee
from fixer.analysis.calls import optimizer_call, optimizer_calls
from fixer.analysis.gradient_resets import mentions_other_reset, resets_in_scope, zeroed_in_loop
from fixer.analysis.passes import pass_body
from fixer.analysis.protocol import call_loops, is_plain_step, optimizer_scopes, zeroes_for
from fixer.analysis.recurring import runs_on_many_iterations
from fixer.analysis.scopes import LOOPS, Scope, scope_nodes
from fixer.analysis.statement_moves import attached_start, is_docstring
from fixer.analysis.step_closures import backpropagates_plainly, built_by_torch, closure_of
from fixer.context import FileContext
from fixer.edits.statements import insert_at_top
from fixer.nodes import walk
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class MissingZeroGrad(Rule):
    code = "GF203"
    name = "missing-zero-grad"
    summary = "A loop calls backward() and step() every iteration but never zero_grad()"
    fix_safety = "unsafe"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in optimizer_scopes(ctx):
            for loop in scope_nodes(scope):
                if isinstance(loop, LOOPS):
                    yield from self._check_loop(ctx, scope, loop)
            yield from self._check_step_function(ctx, scope)
            yield from self._check_closures(ctx, scope)

    def _check_step_function(self, ctx: FileContext, scope: Scope) -> Iterator[Diagnostic]:
        """A function (or method) that backpropagates and steps, called by this file only inside
        loops that clear no gradient (nor call anything that might): each call is one iteration,
        and nothing ever clears the gradients it steps with."""
        if isinstance(scope.node, ast.Module) or any(isinstance(n, LOOPS) for n in scope_nodes(scope)):
            return
        events = block_events(ctx, scope, scope.node.body, through_calls=True)
        backwards = [e for e in events if e.kind == "backward"]
        if not backwards or any(e.spelling == "owner" or e.conditional for e in backwards) or any(e.kind == "zero_grad" for e in events):
            return
        steps = [e for e in events if e.kind == "step" and not e.conditional and e.index > backwards[0].index and is_plain_step(e)]
        if len(steps) != 1 or steps[0].via is not None or zeroed_in_loop(ctx, scope, scope.node, steps[0].owner):
            return
        loops = call_loops(ctx, scope)
        if loops is None or any(id(caller.node) in _optimizer_scope_ids(own) for own, caller, _ in loops):
            return  # a caller's loop that shows optimizer calls is checked, with this call, as a loop
        for own, caller, loop in loops:
            if any(e.kind == "zero_grad" for e in block_events(own, caller, pass_body(loop), through_calls=True)) or mentions_other_reset(own, loop):
                return
        step = steps[0]
        zero = f"{step.owner}.zero_grad()"
        where = "this file makes" if all(own is ctx for own, _, _ in loops) else "the project makes"
        message = (
            f"`{ctx.text(step.call)}` runs on every call of `{scope.node.name}`, which {where} only inside "
            f"loops, but `{step.owner}`'s gradients are never cleared: each step applies the sum of all gradients "
            f"so far; call `{zero}` before the forward pass"
        )
        edits = insert_at_top(ctx, scope.node, zero)
        yield self.diagnostic(ctx, step.site, message, edits, Applicability.UNSAFE, title=f"Insert `{zero}` at the top of `{scope.node.name}`")

    def _check_closures(self, ctx: FileContext, scope: Scope) -> Iterator[Diagnostic]:
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
            yield self._report_closure(ctx, closure, call)

    def _report_closure(self, ctx: FileContext, closure: Scope, call) -> Diagnostic:
        zero = f"{call.owner}.zero_grad()"
        message = (
            f"`{ctx.text(call.node)}` evaluates `{closure.node.name}`, which calls backward() but never clears "
            f"`{call.owner}`'s gradients: each evaluation adds to the gradients of the previous ones (LBFGS "
            f"re-evaluates it several times per step); call `{zero}` at the top of the closure"
        )
        edits = insert_at_top(ctx, closure.node, zero)
        return self.diagnostic(ctx, call.node, message, edits, Applicability.UNSAFE, title=f"Insert `{zero}` at the top of the closure")

    def _check_loop(self, ctx: FileContext, scope: Scope, loop: ast.AST) -> Iterator[Diagnostic]:
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
            if step.conditional and (step.via is not None or not runs_on_many_iterations(ctx, step.call, loop)):
                continue  # may run once per loop (or its guard says nothing)
            if not is_plain_step(step) or zeroed_in_loop(ctx, scope, loop, step.owner):
                continue
            if any(e.kind == "zero_grad" and e.via is not None and zeroes_for(ctx, e.owner or "", step.owner) is not False for e in events):
                continue  # a function the loop calls clears them (maybe one its callee calls)
            reported.add(step.owner)
            backward_first = any(e.kind == "backward" and e.via is step.via and not e.conditional for e in events[: events.index(step)])
            yield self._report(ctx, scope, loop, step, backward_first)

    def _report(self, ctx: FileContext, scope: Scope, loop: ast.AST, step: Event, backward_first: bool) -> Diagnostic:
        call = f"{step.owner}.zero_grad()"
        where = f"`{ctx.text(step.call)}`" if step.via is None else f"`{ctx.text(step.via)}` steps `{step.owner}` and"
        message = (
            f"{where} runs every iteration but `{step.owner}`'s gradients are never cleared in "
            f"the loop: each step applies the sum of all gradients so far; call `{call}` before the forward pass"
        )
        inside = _step_function_top(ctx, scope, step) if step.via is not None and backward_first else None
        if inside is not None:  # a whole training step in a function of this file: zero at its top
            first, call = inside
            where = f"`{ctx.text(step.via)}`"
        else:
            first, where = pass_body(loop)[0], "the loop"
        edits: list[Edit] = []
        if first.lineno > loop.lineno or inside is not None:
            at = attached_start(ctx, first)
            edits = [Edit(at, at, f"{ctx.indent_of(first.lineno)}{call}{ctx.newline}")]
        return self.diagnostic(ctx, step.site, message, edits, Applicability.UNSAFE, title=f"Insert `{call}` at the top of {where}")


def _optimizer_scope_ids(ctx: FileContext) -> frozenset[int]:
    """The scopes the rule checks (``optimizer_scopes``), by node, computed once per file."""
    return ctx.memo("missing_zero_grad_scopes", lambda: frozenset(id(s.node) for s in optimizer_scopes(ctx)))


def _step_function_top(ctx: FileContext, scope: Scope, step: Event) -> Optional[tuple[ast.stmt, str]]:
    """(first statement, zero_grad call in its names) of the function of this file the loop calls,
    which runs the backward and the step itself."""
    callee = resolved_callee(ctx, scope, step.via)
    inner = optimizer_call(ctx, step.call) if callee is not None and (callee.ctx or ctx) is ctx else None
    if inner is None or not any(step.call is n for n in walk(callee.node)):
        return None  # the step is in a helper of the helper: zero in the loop
    body = callee.node.body
    first = body[1] if is_docstring(body[0]) and len(body) > 1 else body[0]
    return (first, f"{inner.owner}.zero_grad()") if first.lineno > callee.node.lineno else None
