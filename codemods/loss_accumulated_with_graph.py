"""## What it does
Finds a loss tensor that is added to a running total (`running_loss += loss`,
`total = total + loss`, a moving average `avg = 0.9 * avg + 0.1 * loss` or `stats["loss"] = m *
stats["loss"] + (1 - m) * loss`, `losses.append(loss)`, `preds.extend(out)`,
`preds = torch.cat((preds, out))`, `self.total += loss`, an average meter's
`losses.update(loss, n)` or `meters["loss"].update(loss, n)` (an object whose class, read in the
project, keeps the argument in `update`: `self.sum += val * n`; a class it cannot read is no
meter, whatever its name), a record
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

from fixer.analysis.accumulations import (
    accumulation,
    differentiable_gradient,
    dotted_names,
    escapes,
    graph_part,
    is_accumulation_of,
    is_meter_update,
    iteration_of,
    logged_record,
    outlives_iteration,
    reaches_backward,
)
from fixer.analysis.numeric_totals import full_reduction, numeric_use, scalar_loss
from fixer.analysis.training_regions import calls_training_method, framework_training_step, frees_graphs_in, returns_backpropagated
from fixer.analysis.calls import BACKWARD_TEXT, training_call_text
from fixer.analysis.graph import facts
from fixer.analysis.reported import evaluation_loop, fed_by_graph
from fixer.analysis.held_values import held_name
from fixer.analysis.kept_elements import KeptElements, kept_elements
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.analysis.no_grad import under_no_grad
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
            found = list(self._candidates(ctx, scope))
            totals = {accumulator for _, accumulator, _ in found}
            for diagnostic, accumulator, part in found:
                # `history.append(epoch_loss / n)` is fixed by fixing `epoch_loss` itself
                if not (dotted_names(part) & (totals - {accumulator})):
                    yield diagnostic
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

    def _candidates(self, ctx: FileContext, scope: Scope) -> Iterator[tuple[Diagnostic, str, ast.expr]]:
        framework_step = framework_training_step(scope)
        evaluation_only = not framework_step and not ctx.mentions(scope.node, BACKWARD_TEXT) and not ctx.mentions(scope.node, training_call_text(ctx))
        if evaluation_only and not any(accumulation(n) for n in scope_nodes(scope)):
            return  # nothing here backpropagates, and nothing accumulates
        graph = facts(ctx, scope)
        for node in scope_nodes(scope):
            found = accumulation(node, graph)
            if found is None:
                continue
            stmt, accumulator, value = found
            value = held_name(ctx, scope, value) or value  # total += out["loss"]: the value of loss
            if under_no_grad(ctx, stmt) or not outlives_iteration(ctx, scope, graph, stmt, accumulator):
                continue
            if escapes(ctx, scope, graph, accumulator) and differentiable_gradient(ctx, graph, value, stmt):
                continue  # a returned sum of create_graph=True gradients is meant to be backpropagated
            iteration = iteration_of(ctx, scope, stmt)
            if evaluation_only and not (evaluation_loop(ctx, scope, graph, stmt, accumulator, value, is_accumulation_of)
                                        and fed_by_graph(graph, value, stmt)):
                continue
            if evaluation_only:
                evaluation = True
            elif frees_graphs_in(ctx, scope, iteration) or (framework_step and iteration is scope.node):
                evaluation = False
            elif evaluation_loop(ctx, scope, graph, stmt, accumulator, value, is_accumulation_of):
                evaluation = True
            elif calls_training_method(ctx, scope, iteration):
                evaluation = False
            else:
                continue  # not a loop that backpropagates every iteration, nor an evaluation loop of a training function
            record = logged_record(ctx, scope, graph, value, stmt)
            if record is not None:  # history.append({"loss": loss, ...})
                parts = [v for v in record.values if graph.carries_graph(v, stmt)]
                if not parts or any(isinstance(v, ast.Name) and graph.sometimes_detached(v.id, stmt) for v in parts):
                    continue
                if reaches_backward(ctx, scope, graph, accumulator):
                    continue
                edits = [Edit(*ctx.span(p), _detached(ctx, p, "detach")) for p in parts]
                names = ", ".join(f"`{ctx.text(p)}`" for p in parts)
                yield self.diagnostic(
                    ctx,
                    stmt,
                    f"`{accumulator}` keeps records holding {names} with their autograd graph, keeping every "
                    "iteration's graph alive; store detached values",
                    edits,
                    title="Store detached values",
                ), accumulator, parts[0]
                continue
            part = graph_part(graph, value, stmt)
            if part is None and returns_backpropagated(ctx, scope, value):
                part = value  # losses.append(agent.update(batch)): the method returns the loss it backpropagated
            if part is None or reaches_backward(ctx, scope, graph, accumulator):
                continue
            numeric = is_meter_update(node) or numeric_use(ctx, scope, graph, accumulator, node)
            scalar = scalar_loss(ctx, scope, part) or full_reduction(ctx, scope, graph, part, stmt)
            method = "item" if scalar and numeric and not evaluation else "detach"
            text = ctx.text(part)
            new = _detached(ctx, part, method)
            start, end = ctx.span(part)
            diagnostic = self.diagnostic(
                ctx,
                stmt,
                f"`{accumulator}` accumulates `{text}` with its autograd graph, keeping every iteration's "
                f"graph alive; accumulate `{new}`",
                [Edit(start, end, new)],
                title=f"Accumulate `{new}`",
            )
            yield diagnostic, accumulator, part


def _detached(ctx: FileContext, part: ast.expr, method: str) -> str:
    text = ctx.text(part)
    return f"{text}.{method}()" if isinstance(part, ATOMS) else f"({text}).{method}()"
