"""## What it does
Finds a loss tensor that is added to a running total (`running_loss += loss`,
`total = total + loss`, a moving average `avg = 0.9 * avg + 0.1 * loss` or `stats["loss"] = m *
stats["loss"] + (1 - m) * loss`, `losses.append(loss)`, `preds.extend(out)`,
`preds = torch.cat((preds, out))`, `self.total += loss`, an average meter's
`losses.update(loss, n)` or `meters["loss"].update(loss, n)` (an object whose class, read in the
project, keeps the argument in `update`: `self.sum += val * n`; a class it cannot read is no
meter, whatever its name; an `update` that also keeps another argument, `stats.update(loss,
parts)` summing the elements of `parts` too, is reported without a fix: converting one argument
would leave the other's graphs kept), a record
`history.append({"loss": loss})`, `losses.append(agent.update(batch))` whose method (of a class
of this file or imported from another project file) returns the loss it backpropagated) in a
training loop that
backpropagates every iteration, when the total lives longer than the iteration and is never
backpropagated itself. A LightningModule's `training_step` counts as such a loop (the framework
backpropagates the loss it returns, so such a file is read even with no backward in its text):
`self.training_step_outputs.append(loss)`. Also a
validation loop without `torch.no_grad()` (`val_loss += loss`) in a function whose own backward
shows that gradients are recorded, or whose callers all run recording them (no `torch.no_grad()`
around any call), when that function never switches the grad mode and the total is only printed,
logged, turned into a number, or returned to callers that only read numbers from it.

A method that adds the elements of a container argument into its object's fields
(`for name, value in losses.items(): self.sums[name] += value`, or blends them in, `prev =
self.ema[name]; self.ema[name] = value if prev is None else 0.9 * prev + 0.1 * value`) is reported at that store when a
loop that backpropagates passes it a dict, list or tuple holding a graph (`meters.update(losses)`
after `losses = {"loss": loss, ...}` or a function returning such a dict), on an object made
before that loop (or held for life by such an object's field, or the caller's own object), and
the fields are read only as numbers, by the object's own methods or through a name holding it. The fix
is made there: `value.item()` when every reader converts with `float()`/`int()`, `value.detach()`
when one reads a tensor (`.item()`), none unless every call passes tensors.

Only values proven to carry a graph count: a call of a function or method of the project is judged by
what it returns (`self.update_model()` returning `loss.item()` is a number, whatever its name), a call
graphfix cannot see into is unknown, and an object known only by its `.backward()` method may be a
loss wrapper (its `get_loss()` is unknown). A sum of `autograd.grad(..., create_graph=True)` gradients
that is returned, stored or passed on is left alone: such a sum is built to be differentiated, and
`create_graph=True` gradients are not the iteration's backward.

## Why is this bad?
`loss` carries its autograd graph. Adding it to a total that survives the iteration links every
iteration's graph to the total, so none of them is freed: memory grows with every step until the
process runs out of it (the PyTorch FAQ's first out-of-memory example). The total is only used for
logging or averaging, so the graph buys nothing.

## Example
```python
running_loss = 0.0
for inputs, targets in loader:
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.step()
    running_loss += loss
```

## Use instead
```python
    running_loss += loss.item()
```
`.item()` is used when the loss is a scalar (it was backpropagated without a gradient argument,
or it is a full reduction such as `q.mean()`, directly or as what a project function returns) and
the total is only used as a number; otherwise `.detach()`, which keeps the total a tensor
(for `torch.stack(losses)`, `total.item()` and the like). The tensors of a logged record and the
losses of a validation loop are detached (better still, run validation under `torch.no_grad()`).

## Fix safety
Safe. Gradients and parameters are unchanged: the total never reaches a backward call (the rule
does not fire when it does, as in summing several losses and calling backward once). With
`.item()` the total becomes a Python float, so `print(total)` shows `1.23` instead of
`tensor(1.23, grad_fn=...)`.
"""

from __future__ import annotations

import ast
from typing import Iterator

from fixer.analysis.accumulated_graphs import Accumulated, accumulated_graphs, may_be_container
from fixer.analysis.kept_elements import KeptElements, kept_elements
from fixer.analysis.scopes import Scope, scopes
from fixer.context import FileContext
from fixer.rule import Diagnostic, Edit, Rule

ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)


class LossAccumulatedWithGraph(Rule):
    code = "GF301"
    name = "loss-accumulated-with-graph"
    summary = "A loss added to a running total keeps every iteration's autograd graph alive"
    fix_safety = "safe"

    @classmethod
    def applies_to(cls, data: bytes) -> bool:
        """Also a LightningModule with no backward in its text: the framework backpropagates what
        ``training_step`` returns."""
        return super().applies_to(data) or b"def training_step" in data and b"LightningModule" in data

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in scopes(ctx):
            for found in accumulated_graphs(ctx, scope):
                yield self._report(ctx, scope, found)
        for kept in kept_elements(ctx):  # meters.update(losses): `self.sums[name] += value` in the meter
            yield self._kept(ctx, kept)

    def _kept(self, ctx: FileContext, kept: KeptElements) -> Diagnostic:
        store, field = kept.store, f"{kept.store.parameter}"
        texts = sorted({ctx.text(e) for e in store.elements})
        new = ", ".join(f"`{t}.{kept.fix}()`" for t in texts) if kept.fix else None
        message = (f"`{ctx.text(store.stmt).split(chr(10))[0].strip()}` keeps the elements of `{field}` with their autograd graph "
                   f"(called with graphs at line {kept.call.lineno}), keeping every iteration's graph alive")
        if new is None:
            return self.diagnostic(ctx, store.stmt, message + "; store numbers or detached tensors")
        edits = [Edit(*ctx.span(e), f"{ctx.text(e)}.{kept.fix}()") for e in store.elements]
        return self.diagnostic(ctx, store.stmt, f"{message}; store {new}", edits, title=f"Store {new}")

    def _report(self, ctx: FileContext, scope: Scope, found: Accumulated) -> Diagnostic:
        stmt, accumulator, parts = found.stmt, found.accumulator, found.parts
        if found.record:
            edits = [Edit(*ctx.span(p), _detached(ctx, p, "detach")) for p in parts]
            names = ", ".join(f"`{ctx.text(p)}`" for p in parts)
            return self.diagnostic(
                ctx,
                stmt,
                f"`{accumulator}` keeps records holding {names} with their autograd graph, keeping every "
                "iteration's graph alive; store detached values",
                edits,
                title="Store detached values",
            )
        part = parts[0]
        new = _detached(ctx, part, found.method)
        if found.also_kept:  # (one argument converted would leave the others' graphs kept)
            others = ", ".join(f"`{ctx.text(a)}`" for a in found.also_kept)
            return self.diagnostic(
                ctx,
                stmt,
                f"`{accumulator}` accumulates `{ctx.text(part)}` with its autograd graph, and its update keeps {others} too, "
                "keeping every iteration's graph alive; keep numbers or detached tensors of every value it is given",
            )
        if may_be_container(ctx, scope, part):
            return self.diagnostic(  # (a dict or a list of tensors: no `.detach()` of its own)
                ctx,
                stmt,
                f"`{accumulator}` accumulates `{ctx.text(part)}`, which holds tensors with their autograd graph, keeping "
                "every iteration's graph alive; keep numbers or detached tensors of its values",
            )
        return self.diagnostic(
            ctx,
            stmt,
            f"`{accumulator}` accumulates `{ctx.text(part)}` with its autograd graph, keeping every iteration's "
            f"graph alive; accumulate `{new}`",
            [Edit(*ctx.span(part), new)],
            title=f"Accumulate `{new}`",
        )


def _detached(ctx: FileContext, part: ast.expr, method: str) -> str:
    text = ctx.text(part)
    return f"{text}.{method}()" if isinstance(part, ATOMS) else f"({text}).{method}()"
