"""## What it does
Finds `torch.autograd.grad(...)` called without `create_graph=True` whose result then flows into
a loss that is backpropagated, or into another `torch.autograd.grad`: a gradient penalty
(WGAN-GP, R1, input-gradient regularisation), the inner step of second-order MAML, a
Hessian-vector product. Also `loss.backward()` without `create_graph=True` whose `x.grad` is
reduced to a penalty (`x.grad.pow(2).sum()`) that a later backward backpropagates (double
backpropagation), when `x` is a value (never the callee `torch.autograd.grad`) and an input of
the graph that backward walks. The gradients are followed through assignments, loops over them,
lists they are appended to, and helper functions or methods (`self.net_f(x)`) that return them;
a comprehension whose elements are detached (`[g.detach() for g in grads]`) ends the flow.
A later `autograd.grad(loss, fast_weights)` taken with respect to tensors derived from the
gradients starts a new gradient chain: it is followed on to the backward that reaches the
original leaves (MAML's meta-backward), and nothing is reported when none does (test-time
fine-tuning).

A helper may leave the flag to its caller (`def input_gradients(critic, x, create_graph=False)`
passing `create_graph=create_graph` on, directly or through other helpers of the project): then a
call that gives it `False`, or nothing while its default is `False`, is reported where it is made,
when what the helper returns reaches a backward of the same function, and the fix passes the
helper's flag as `True` at that call.

## Why is this bad?
Without `create_graph=True` the returned gradients are plain constants: no graph records how they
depend on the parameters. A penalty built from them contributes nothing to the outer gradient
(the regulariser silently does nothing), MAML's meta-gradient loses its second-order term, and
when nothing else in the outer loss requires grad the outer backward raises `element 0 of tensors
does not require grad and does not have a grad_fn`. `retain_graph=True` only keeps the first
graph alive; it does not make the gradients differentiable.

## Example
```python
grads = torch.autograd.grad(critic(mixed).sum(), mixed, retain_graph=True)[0]
penalty = ((grads.norm(2, dim=1) - 1) ** 2).mean()
(critic_loss + 10 * penalty).backward()
```

## Use instead
```python
grads = torch.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)[0]
```
`create_graph=True` implies `retain_graph=True`, so it replaces a constant `retain_graph=True`.

Left alone: `create_graph` given in any form (`create_graph=False` or `create_graph=not
first_order` is a deliberate first-order choice), code that mentions first-order variants
(`first_order`, FOMAML, Reptile), gradients that only feed logging, norms or clipping, pass
through `.detach()`, `.item()`, `.sign()` (adversarial steps), updates under `torch.no_grad()`,
and steps that move the very input they differentiate against when it was made a fresh leaf
(`x_adv = x_adv + alpha * grad` after `x_adv = x.clone().requires_grad_()`: an L2 PGD attack or
a Langevin sampling step); an `x.grad` read combined with `x` itself (`x + eps * x.grad`).

## Fix safety
Unsafe: the gradients change, which is the point. The outer backward now includes the derivative
of the penalty or of the inner update (the second-order term); parameters reached through the
inner gradients receive different (correct) gradients, and memory and time grow by a second
backward graph.
"""

from __future__ import annotations

import ast
import os
from typing import Iterator

from fixer.analysis.calls import BackwardCall, backward_calls
from fixer.analysis.forwarded_flags import flag_calls
from fixer.analysis.gradient_consumers import Consumer, grad_consumer, helper_consumer, penalty_reads
from fixer.analysis.scopes import scopes
from fixer.context import FileContext
from fixer.edits.keywords import flag_on_edit, keyword_edit
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class GradWithoutCreateGraph(Rule):
    code = "GF107"
    name = "grad-without-create-graph"
    summary = "autograd.grad results used in a backpropagated loss need create_graph=True"
    fix_safety = "unsafe"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in scopes(ctx):
            for call in backward_calls(ctx, scope):
                if call.kind == "autograd.grad" and call.keyword("create_graph") is None:
                    consumer = grad_consumer(ctx, scope, call)
                    if consumer is not None:
                        yield self._report(ctx, call, consumer)
            for backward, consumer in penalty_reads(ctx, scope):
                yield self._report(ctx, backward, consumer)
            for node, flag, off in flag_calls(ctx, scope) if backward_calls(ctx, scope) else ():
                consumer = helper_consumer(ctx, scope, node)
                if consumer is not None:
                    yield self._report_call(ctx, node, flag, off, consumer)

    def _report_call(self, ctx: FileContext, call: ast.Call, flag: str, off: ast.expr, consumer: Consumer) -> Diagnostic:
        """The helper's ``flag`` decides ``create_graph`` of the gradients it returns; ``off`` is the
        argument giving it False, or the call itself where it gives nothing."""
        edit = flag_on_edit(ctx, call, flag, off)
        return self.diagnostic(
            ctx,
            call,
            f"`{ctx.text(call.func)}` returns gradients taken with `create_graph={flag}`, which this call leaves "
            f"False: they reach `{consumer.ctx.text(consumer.call.target)}`, backpropagated on line "
            f"{consumer.call.node.lineno}{_elsewhere(ctx, consumer)}, as constants, and the outer gradient misses "
            f"their derivative (the penalty or second-order term). Pass `{flag}=True`",
            [edit],
            Applicability.UNSAFE,
            title=f"Pass `{flag}=True`",
        )

    def _report(self, ctx: FileContext, call: BackwardCall, consumer: Consumer) -> Diagnostic:
        retain = call.keyword("retain_graph")
        if retain is None:
            edits = [keyword_edit(ctx, call.node, "create_graph")]
        elif isinstance(retain.value, ast.Constant) and retain.value.value is True:
            start, end = ctx.span(retain)
            edits = [Edit(start, end, "create_graph=True")]
        else:
            edits = []  # retain_graph=False or an expression: the user decides
        return self.diagnostic(
            ctx,
            call.node,
            f"the gradients {'of this autograd.grad' if call.kind == 'autograd.grad' else 'this backward writes to .grad'} "
            f"reach `{consumer.ctx.text(consumer.call.target)}`, backpropagated on line "
            f"{consumer.call.node.lineno}{_elsewhere(ctx, consumer)}, but without create_graph=True they are constants: the outer gradient misses "
            f"their derivative (the penalty or second-order term). Pass create_graph=True",
            edits,
            Applicability.UNSAFE,
            title="Pass create_graph=True",
        )


def _elsewhere(ctx: FileContext, consumer: Consumer) -> str:
    if consumer.ctx is ctx:
        return ""
    return f" of {os.path.relpath(consumer.ctx.path, os.path.dirname(os.path.abspath(ctx.path)))}"
