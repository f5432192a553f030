"""## What it does
Finds a training loop that calls `loss.backward()` and then `optimizer.step()` on every
iteration but never clears that optimizer's gradients: no `optimizer.zero_grad()` (nor
`model.zero_grad()`, nor `p.grad = None`) in the loop or in a function it calls; or a step
function (or method) that does both and that this file calls only inside loops that clear
nothing (`optimizer.zero_grad()` goes at its top); a zero_grad of another optimizer, over other
parameters (`opt_E.zero_grad()` in the encoder's step beside the discriminator's), clears none of
its gradients. Also an `optimizer.step(closure)` (or
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
gradients at its top instead. A function that clears them after its step only when asked
(`def optimizer_step(self, zero_grad=False): ... if zero_grad: self.optimizer.zero_grad()`),
called without asking (`False`, or nothing while the default is `False`), clears nothing on that
call: the fix asks (`self.optimizer_step(zero_grad=True)`).
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
from typing import Iterator

from fixer.analysis.call_events import Event
from fixer.analysis.passes import pass_body
from fixer.analysis.protocol import optimizer_scopes
from fixer.analysis.scopes import LOOPS, Scope, scope_nodes
from fixer.analysis.statement_moves import attached_start
from fixer.analysis.unzeroed_steps import closure_steps, loop_steps, skipped_reset_flag, step_function_step, step_function_top
from fixer.context import FileContext
from fixer.edits.keywords import flag_on_edit
from fixer.edits.statements import insert_at_top
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
                    for step, backward_first in loop_steps(ctx, scope, loop):
                        yield self._report(ctx, scope, loop, step, backward_first)
            found = step_function_step(ctx, scope)
            if found is not None:
                yield self._report_step_function(ctx, scope, *found)
            for closure, call in closure_steps(ctx, scope):
                yield self._report_closure(ctx, closure, call)

    def _report_step_function(self, ctx: FileContext, scope: Scope, step: Event, in_this_file: bool) -> Diagnostic:
        zero = f"{step.owner}.zero_grad()"
        where = "this file makes" if in_this_file else "the project makes"
        message = (
            f"`{ctx.text(step.call)}` runs on every call of `{scope.node.name}`, which {where} only inside "
            f"loops, but `{step.owner}`'s gradients are never cleared: each step applies the sum of all gradients "
            f"so far; call `{zero}` before the forward pass"
        )
        edits = insert_at_top(ctx, scope.node, zero)
        return self.diagnostic(ctx, step.site, message, edits, Applicability.UNSAFE, title=f"Insert `{zero}` at the top of `{scope.node.name}`")

    def _report_closure(self, ctx: FileContext, closure: Scope, call) -> Diagnostic:
        zero = f"{call.owner}.zero_grad()"
        message = (
            f"`{ctx.text(call.node)}` evaluates `{closure.node.name}`, which calls backward() but never clears "
            f"`{call.owner}`'s gradients: each evaluation adds to the gradients of the previous ones (LBFGS "
            f"re-evaluates it several times per step); call `{zero}` at the top of the closure"
        )
        edits = insert_at_top(ctx, closure.node, zero)
        return self.diagnostic(ctx, call.node, message, edits, Applicability.UNSAFE, title=f"Insert `{zero}` at the top of the closure")

    def _report(self, ctx: FileContext, scope: Scope, loop: ast.AST, step: Event, backward_first: bool) -> Diagnostic:
        call = f"{step.owner}.zero_grad()"
        where = f"`{ctx.text(step.call)}`" if step.via is None else f"`{ctx.text(step.via)}` steps `{step.owner}` and"
        message = (
            f"{where} runs every iteration but `{step.owner}`'s gradients are never cleared in "
            f"the loop: each step applies the sum of all gradients so far; call `{call}` before the forward pass"
        )
        flag = skipped_reset_flag(ctx, scope, step)
        if flag is not None:  # ``self.optimizer_step()`` clears them only when asked: ask
            edit = flag_on_edit(ctx, step.via, flag[0], flag[1])
            return self.diagnostic(ctx, step.site, f"{message.split('; call')[0]}; `{ctx.text(step.via.func)}` clears them "
                                   f"after its step only with `{flag[0]}=True`: pass it", [edit], Applicability.UNSAFE,
                                   title=f"Pass `{flag[0]}=True`")
        inside = step_function_top(ctx, scope, step) if step.via is not None and backward_first else None
        if inside is not None:  # a whole training step in a function of this file: zero at its top
            first, call = inside[0], f"{inside[1]}.zero_grad()"
            where = f"`{ctx.text(step.via)}`"
        else:
            first, where = pass_body(loop)[0], "the loop"
        edits: list[Edit] = []
        if first.lineno > loop.lineno or inside is not None:
            at = attached_start(ctx, first)
            edits = [Edit(at, at, f"{ctx.indent_of(first.lineno)}{call}{ctx.newline}")]
        return self.diagnostic(ctx, step.site, message, edits, Applicability.UNSAFE, title=f"Insert `{call}` at the top of {where}")

