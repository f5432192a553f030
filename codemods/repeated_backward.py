"""## What it does
Finds a tensor that is backpropagated a second time: `loss.backward()` twice with no new value of
`loss` between, or an extra `loss.backward()` right after a gradient-accumulation loop that
already backpropagated every micro-batch's `loss` (it walks the last one's graph again); also
`loss = step(batch)` followed by `loss.backward()` where `step` (of this file or another project
file) backpropagates and returns that very loss, on every call or under a flag the call leaves on
(`if backward: loss.backward()` with `backward=True` by default). It only
fires when the loss certainly saved tensors for backward (it comes from a module, criterion or
an operation such as `*`, `@`, `exp`), since graphs of additions alone (`y = x + 1`) can be
walked twice without error.

## Why is this bad?
The first backward frees the graph's saved tensors, so the second raises `RuntimeError: Trying to
backward through the graph a second time`. Even when it is made to run, it adds the same
gradients again: the parameters receive twice the gradient of that loss.

## Example
```python
computed_loss = criterion(model(inputs), target)
computed_loss.backward()
computed_loss.backward()
```
```python
for offset in range(accumulation_steps):
    loss = criterion(model(batch(offset)), target(offset))
    loss.backward()
loss.backward()  # the last micro-batch again
optimizer.step()
```

## Use instead
For a straight repeat, `retain_graph=True` on every call but the last (what the error message
proposes), if the doubled gradient is really wanted; usually the duplicate call should go:
```python
computed_loss.backward(retain_graph=True)
computed_loss.backward()
```
After an accumulation loop, delete the extra call: the loop already accumulated every
micro-batch's gradients. When an optimizer step runs between the two calls, the later call is a
leftover (`retain_graph=True` would only trade the error for "modified by an inplace
operation", the step having changed saved parameters): the fix deletes it.

Left alone: a loss recomputed between the calls, a first call that already passes
`retain_graph=True`, `create_graph=True` (higher-order gradients), values whose graph may save
nothing, calls in different branches, and calls in loops around them (GF102).

## Fix safety
When the first call is `torch.autograd.grad` (a gradient norm, a penalty computed on the side),
`retain_graph=True` there is safe: autograd.grad returns gradients without accumulating them, so
the later backward computes exactly what it was written to. Otherwise unsafe, and the user decides. `retain_graph=True` makes the program run as written: the repeated
call adds the loss's gradients a second time (they double), which is rarely intended. Deleting
the call after an accumulation loop changes the gradients of the parameters the last micro-batch
reaches: they no longer receive that micro-batch's gradient twice. Deleting a call after a step
leaves `.grad` holding the gradients of the first call only.
"""

from __future__ import annotations

import ast
from typing import Iterator

from fixer.analysis.backward_repeats import (
    AFTER_LOOP,
    AFTER_RETURNING_HELPER,
    AFTER_STEP,
    THROUGH_HELPER,
    Repeat,
    repeated_backwards,
)
from fixer.analysis.calls import BackwardCall
from fixer.analysis.names import dotted
from fixer.analysis.returned_reads import returned_field
from fixer.analysis.scopes import scopes
from fixer.context import FileContext
from fixer.edits.keywords import keyword_edit
from fixer.edits.statements import delete_statement
from fixer.rule import Applicability, Diagnostic, Rule


class RepeatedBackward(Rule):
    code = "GF106"
    name = "repeated-backward"
    summary = "The same tensor is backpropagated again after its graph was freed"
    fix_safety = "mixed"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in scopes(ctx):
            for repeat in repeated_backwards(ctx, scope):
                yield self._report(ctx, repeat)

    def _report(self, ctx: FileContext, repeat: Repeat) -> Diagnostic:
        call, later = repeat.call, repeat.later
        if repeat.kind == AFTER_RETURNING_HELPER:
            return self._delete_returned(ctx, call, later, repeat.inner)
        if repeat.kind == THROUGH_HELPER:
            return self._retain_in_helper(ctx, call, repeat.inner, repeat.here, later)
        if repeat.kind == AFTER_STEP:
            return self._delete_after_step(ctx, call, later)
        if repeat.kind == AFTER_LOOP:
            return self._delete(ctx, call, later)
        return self._retain(ctx, call, later)

    def _retain(self, ctx: FileContext, call: BackwardCall, later: BackwardCall) -> Diagnostic:
        name = ctx.text(call.target)
        if call.kind == "autograd.grad":  # returns gradients without accumulating: nothing doubles
            return self.diagnostic(
                ctx,
                call.node,
                f"`{name}` is backpropagated again on line {later.node.lineno}, after this autograd.grad freed its "
                f"graph: that call raises 'backward through the graph a second time'. Pass retain_graph=True here",
                [keyword_edit(ctx, call.node, "retain_graph")],
                Applicability.SAFE,
                title="Pass retain_graph=True",
            )
        return self.diagnostic(
            ctx,
            call.node,
            f"`{name}` is backpropagated again on line {later.node.lineno}, after this call freed its graph: "
            f"that call raises 'backward through the graph a second time'. A repeated backward doubles "
            f"`{name}`'s gradients and is usually a mistake (delete one call); if it is intended, pass "
            f"retain_graph=True here",
            [keyword_edit(ctx, call.node, "retain_graph")],
            Applicability.UNSAFE,
            title="Pass retain_graph=True (the gradients are added twice)",
        )

    def _retain_in_helper(self, ctx: FileContext, call: BackwardCall, inner: BackwardCall, here: bool, later: BackwardCall) -> Diagnostic:
        """``here``: the helper is in this file (an edit of another file is never made from this one)."""
        name, helper = ctx.text(call.target), ctx.text(call.node.func)
        return self.diagnostic(
            ctx,
            call.node,
            f"`{helper}` backpropagates `{name}` (its line {inner.node.lineno}) and `{name}` is backpropagated again on "
            f"line {later.node.lineno}, after that call freed its graph: it raises 'backward through the graph a "
            f"second time'. The gradients are added twice; usually one backward is a mistake. If both are "
            f"intended, pass retain_graph=True inside `{helper}`",
            [keyword_edit(ctx, inner.node, "retain_graph")] if here else [],
            Applicability.UNSAFE,
            title=f"Pass retain_graph=True in `{helper}`",
        )

    def _delete_after_step(self, ctx: FileContext, call: BackwardCall, later: BackwardCall) -> Diagnostic:
        return self._delete_later(
            ctx, call, later,
            f"was already backpropagated on line {call.node.lineno} and an optimizer step ran since: this "
            f"call walks the freed graph again and raises 'backward through the graph a second time' (with "
            f"retain_graph=True it would meet the parameters the step changed in place). Delete it",
        )

    def _delete(self, ctx: FileContext, call: BackwardCall, later: BackwardCall) -> Diagnostic:
        return self._delete_later(
            ctx, call, later,
            f"was already backpropagated in the loop above (line {call.node.lineno}); this call walks the "
            f"last iteration's freed graph again and raises 'backward through the graph a second time'. "
            f"Delete it: the loop already accumulated every iteration's gradients",
        )

    def _delete_returned(self, ctx: FileContext, call: BackwardCall, later: BackwardCall, inner: BackwardCall) -> Diagnostic:
        field = returned_field(ctx, call.node) if isinstance(call.node, ast.Call) else call.node
        if field is None:
            source = f"what `{ctx.text(call.node.func)}` returns after backpropagating it"
        else:  # loss = trainer.loss (or an accessor returning it): a field the method that stores it backpropagates
            source = f"the field `{dotted(field)}`, which the method that stores it backpropagates"
        return self._delete_later(
            ctx, call, later,
            f"is {source} (its line {inner.node.lineno}); this call walks "
            f"that freed graph again and raises 'backward through the graph a second time'. Delete it",
        )

    def _delete_later(self, ctx: FileContext, call: BackwardCall, later: BackwardCall, why: str) -> Diagnostic:
        """Delete the later backward's statement (when it stands alone on its lines)."""
        name = ctx.text(call.target)
        stmt = ctx.statement_of(later.node)
        deleted = delete_statement(ctx, stmt, keep_comment=False) if isinstance(stmt, ast.Expr) and stmt.value is later.node else None
        edits = [deleted] if deleted is not None else []
        return self.diagnostic(
            ctx, later.node, f"`{name}` {why}", edits, Applicability.UNSAFE, title=f"Delete the extra `{name}` backward"
        )
