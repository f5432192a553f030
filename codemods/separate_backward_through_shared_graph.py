"""## What it does
Finds two (or more) backward calls in a row on *different* losses whose graphs share a part that
saved tensors (one module call's outputs, a shared trunk, an intermediate tensor), when the first
call does not pass `retain_graph=True`: multi-task heads, actor-critic losses on a shared trunk,
two networks chained into each other, losses returned by helper functions of the same file. Also
`for loss in losses: loss.backward()` over a list (or `for name, loss in losses.items()` over a
dict) whose elements share such a part (the outputs of one forward pass, heads on one trunk):
the fix backpropagates `sum(losses)` (`sum(losses.values())`) once. A filter around the backward
that calls nothing (`if loss is not None:`, `if enabled[task]:`) becomes the sum's condition
(`sum(loss for task, loss in losses.items() if enabled[task]).backward()`); a function of the
project whose whole body is its argument's `backward()` (`self.backprop(loss)`) is called once
with the sum; a step function that does more with each loss is reported without an edit. Other
statements in such a loop that touch no gradient or parameter (`print(...)`, a counter) leave the
finding but get no fix: where they go relative to the one backward is the author's choice; so
does a call that also passes the loop's variables (`trainer.step(name, loss)`).

## Why is this bad?
The first backward frees the saved tensors of every node it walks, including the shared part.
The second backward walks that part again and raises `RuntimeError: Trying to backward through
the graph a second time`.

## Example
```python
logits, value = model(x)
policy_loss = -(log_prob(logits) * advantage).mean()
value_loss = F.mse_loss(value, returns)
policy_loss.backward()
value_loss.backward()
```

## Use instead
When nothing between the calls reads or changes gradients or parameters, backpropagate the sum
once (one walk of the shared part, the least memory):
```python
(policy_loss + value_loss).backward()
```
When something between does (`zero_grad()` of a second optimizer, `step()`, reading `.grad`,
gradient clipping, a call the analysis cannot see into), the calls must stay separate and every
call but the last through the shared graph gets `retain_graph=True`. Calls each alone under its
own copy of one guard (`if step % 2 == 0: loss_a.backward()`, then the same `if` around
`loss_b.backward()`) run in the same passes: they merge into the first guard and the other goes.
A function of this file or another project file called between them is looked into.

Sharing is proven, never assumed. The outputs of one module call share a graph only when the
file shows the module (a torch `nn` class, or a class of this file whose `forward` derives every
returned element from one saving origin, also behind `nn.DataParallel`); otherwise only the same
output reaching both losses counts. A module the analysis cannot see into (`model =
create_model(opt)`, `config.network_fn()`) gives no finding. A value computed under
`torch.no_grad()` / `inference_mode()` is a graph boundary, like `.detach()`.

Two calls of one project function or method (`scaler.backward(loss_a)`, then
`scaler.backward(loss_b)`, the class in another file) that differ only in the loss merge into one
call on the sum when, for those arguments, the callee only backpropagates a linear image of it
(`(loss.float() * self.scale).backward()`, an `if` on a constant argument not taken); otherwise
they are reported without an edit.

Backward calls inside a loop whose shared part is built before the loop are left to GF102
(`subgraph-built-before-loop`); the same tensor backwarded twice is GF106 (`repeated-backward`).
Only plain `loss.backward()` calls are merged; calls with arguments (`gradient=`, `inputs=`) or
other spellings (`scaler.scale(loss).backward()`, `accelerator.backward(loss)`) get `retain_graph`.

## Fix safety
The merge of a filtered loop is unsafe: when the filter keeps no loss, the sum is `0`, which has
no `backward()`. Otherwise the merge is safe: the gradients of the sum are the sums of the
gradients, identical up to
floating-point rounding, and nothing between the calls looked at the intermediate gradients.
`retain_graph=True` changes no gradient at all: it keeps the saved tensors until the last
backward, so the program computes exactly the gradients it was written to compute. It is marked
safe when only gradient reads or resets (`zero_grad()`, `.grad`) lie between the calls, and
unsafe when a parameter may change between them (`step()`, in-place updates, unknown calls):
then the second backward may meet a saved parameter modified in place and raise instead.
"""

from __future__ import annotations

import ast
from typing import Iterator

from fixer.analysis.calls import BackwardCall
from fixer.analysis.gradient_effects import Effect
from fixer.analysis.scopes import Scope, scopes
from fixer.analysis.shared_backward_pairs import SharedPair, effect_between, loop_call_argument, losses_loops, saves_weights, shared_pairs
from fixer.analysis.shared_backwards import backward_unit, loop_value
from fixer.analysis.shared_graph import Origin
from fixer.analysis.wrapped_backward import merged_calls
from fixer.context import FileContext
from fixer.edits.keywords import keyword_edit
from fixer.edits.statements import delete_statement
from fixer.rule import Applicability, Diagnostic, Edit, Rule

ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)


class SeparateBackwardThroughSharedGraph(Rule):
    code = "GF105"
    name = "separate-backward-through-shared-graph"
    summary = "Separate backward calls on losses that share a graph: the first frees what the second needs"
    fix_safety = "mixed"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in scopes(ctx):
            for call, loop, tests in losses_loops(ctx, scope):
                yield _merge_loop(self, ctx, scope, call, loop, tests)
            for pair in shared_pairs(ctx, scope):
                if pair.chain:
                    yield _merge(self, ctx, pair)
                elif pair.call.kind == "call" or pair.partner.kind == "call":
                    yield _across_calls(self, ctx, scope, pair.call, pair.partner, pair.origins)
                else:
                    yield _retain(self, ctx, scope, pair.call, pair.partner, pair.origins)


def _merge_loop(rule: Rule, ctx: FileContext, scope: Scope, call: BackwardCall, loop: ast.For, tests: list[ast.expr]) -> Diagnostic:
    items = ctx.text(loop.iter)
    if items.endswith(".items()") and not tests:
        items = items[: -len(".items()")] + ".values()"
    value = loop_value(loop)
    condition = " and ".join(f"({ctx.text(t)})" if len(tests) > 1 and isinstance(t, ast.BoolOp) else ctx.text(t) for t in tests)
    total = f"sum({items})" if not tests else f"sum({value} for {ctx.text(loop.target)} in {items} if {condition})"
    once, edits = f"{total}.backward()", []
    summable, argument = loop_call_argument(ctx, scope, call, loop)
    if summable and ctx.is_own_line(loop) and len(loop.body) == 1:  # other statements: the author places the sum
        if argument is not None:  # the function that backpropagates its argument, called once with the sum
            (start, end), (at, until) = ctx.span(call.node), ctx.span(argument)
            once = ctx.source[start:at] + total + ctx.source[until:end]
        start, end = ctx.span(loop)
        edits = [Edit(start, end, once)]
    return rule.diagnostic(
        ctx,
        loop,
        f"The losses in `{items}` share one graph; the first backward in this loop frees it and the second "
        f"raises 'backward through the graph a second time'. Backpropagate their sum once: `{once}`",
        edits,
        Applicability.SAFE if not tests else Applicability.UNSAFE,  # a filter may keep no loss: `0` has no backward
        title=f"Backpropagate `{total}` once",
    )


def _merge(rule: Rule, ctx: FileContext, pair: SharedPair) -> Diagnostic:
    """One ``(a + b).backward()`` at the first call (or the last, when a loss is computed between)."""
    chain, host = pair.chain, pair.host
    stmts = [backward_unit(ctx, c) for c in chain]
    total = " + ".join(_operand(ctx, c.target, i) for i, c in enumerate(chain))
    receiver = chain[host].node.func.value
    start, end = ctx.span(receiver)
    grouped = ctx.source[start - 1 : start] == "(" and ctx.source[end : end + 1] == ")"  # `(a * 0.5).backward()`
    deleted = [delete_statement(ctx, s) for i, s in enumerate(stmts) if i != host]
    edits = [Edit(start, end, total if grouped else f"({total})"), *deleted] if None not in deleted else []
    names = ", ".join(f"`{ctx.text(c.target)}`" for c in chain)
    return rule.diagnostic(
        ctx,
        chain[0].node,
        f"{names} share the graph of {_describe(ctx, pair.origins)}; the first backward frees it and the next raises "
        f"'backward through the graph a second time'. Backpropagate the sum once: `({total}).backward()`",
        edits,
        Applicability.SAFE,
        title=f"Backpropagate `({total})` once",
    )


def _retain(rule: Rule, ctx: FileContext, scope: Scope, call: BackwardCall, partner: BackwardCall, origins: frozenset[Origin]) -> Diagnostic:
    effect = effect_between(ctx, scope, call, partner)
    if effect == Effect.CHANGES and saves_weights(ctx, scope, call, partner, origins):  # a kept graph would meet them changed
        return rule.diagnostic(
            ctx,
            call.node,
            f"`{ctx.text(call.target)}` and `{ctx.text(partner.target)}` share the graph of {_describe(ctx, origins)}; "
            f"this backward frees it and the later one raises 'backward through the graph a second time'. Parameters "
            f"that graph saved change between the calls, so retain_graph=True would raise 'modified by an inplace "
            f"operation': build what the later loss needs after the change, or backpropagate once",
        )
    applicability = Applicability.UNSAFE if effect == Effect.CHANGES else Applicability.SAFE
    reason = "parameters may change between the calls" if effect == Effect.CHANGES else "gradients are read or reset between the calls"
    return rule.diagnostic(
        ctx,
        call.node,
        f"`{ctx.text(call.target)}` and `{ctx.text(partner.target)}` share the graph of {_describe(ctx, origins)}; "
        f"this backward frees it and the later one raises 'backward through the graph a second time'. "
        f"Pass retain_graph=True here ({reason}, so they are not merged)",
        [keyword_edit(ctx, call.node, "retain_graph")],
        applicability,
        title="Pass retain_graph=True",
    )


def _across_calls(rule: Rule, ctx: FileContext, scope: Scope, call: BackwardCall, partner: BackwardCall, origins: frozenset[Origin]) -> Diagnostic:
    """One of the two backward passes runs inside a step function: merged when both call one
    function that only backpropagates a linear image of the argument they differ in."""
    first, second = (f"`{ctx.text(c.node)}`" if c.kind == "call" else f"`{ctx.text(c.target)}.backward()`" for c in (call, partner))
    summed = merged_calls(ctx, scope, call, partner)
    deleted = delete_statement(ctx, ctx.statement_of(partner.node)) if summed is not None else None
    if deleted is not None:
        total = " + ".join(_operand(ctx, a, i) for i, a in enumerate(summed))
        return rule.diagnostic(
            ctx,
            call.node,
            f"{first} and {second} backpropagate through the shared graph of {_describe(ctx, origins)}; the first "
            f"frees it and the second raises 'backward through the graph a second time'. The function only "
            f"backpropagates its argument: call it once with the sum `{total}`",
            [Edit(*ctx.span(summed[0]), total), deleted],
            Applicability.SAFE,
            title=f"Backpropagate `{total}` in one call",
        )
    return rule.diagnostic(
        ctx,
        call.node,
        f"{first} and {second} backpropagate through the shared graph of {_describe(ctx, origins)}; the first "
        f"frees it and the second raises 'backward through the graph a second time'. Backpropagate both losses "
        f"at once (their sum), detach the shared part where the second loss must not train it, or recompute it "
        f"before the second",
    )


def _describe(ctx: FileContext, origins: frozenset[Origin]) -> str:
    latest = max(origins, key=lambda o: (o.stmt.lineno, o.stmt.col_offset))
    text = ctx.text(latest.value) if latest.value is not None else ctx.text(latest.stmt)
    return f"`{text if len(text) <= 40 else text[:37] + '...'}`"


def _operand(ctx: FileContext, target: ast.expr, index: int) -> str:
    text = ctx.text(target)
    keep = isinstance(target, ATOMS) or (isinstance(target, ast.BinOp) and not isinstance(target.op, (ast.Add, ast.Sub)))
    return text if keep or (index == 0 and isinstance(target, ast.BinOp)) else f"({text})"
