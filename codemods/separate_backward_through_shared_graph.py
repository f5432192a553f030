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
from typing import Iterator, Optional

from fixer.analysis.calls import BackwardCall, backward_calls
from fixer.analysis.gradient_effects import Effect, gradient_effect
from fixer.analysis.scopes import LOOPS, Scope, enclosing_loops, scope_nodes, scopes
from fixer.analysis.training_calls import training_calls
from fixer.analysis.undetached_fakes import undetached_fake_lines
from fixer.analysis.wrapped_backward import backward_wrapper_argument, merged_calls
from fixer.analysis.shared_backwards import (
    all_available_at,
    backward_unit,
    bound_in,
    loop_over_losses,
    loop_value,
    mergeable_chain,
    next_sharing,
    standalone,
    strictly_between,
    strictly_inside,
)
from fixer.analysis.shared_graph import Origin, retains_graph, same_pass_later
from fixer.context import FileContext
from fixer.edits.keywords import keyword_edit
from fixer.nodes import walk
from fixer.rule import Applicability, Diagnostic, Edit, Rule

ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)


class SeparateBackwardThroughSharedGraph(Rule):
    code = "GF105"
    name = "separate-backward-through-shared-graph"
    summary = "Separate backward calls on losses that share a graph: the first frees what the second needs"
    fix_safety = "mixed"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in scopes(ctx):
            calls = [c for c in backward_calls(ctx, scope) if standalone(ctx, c)]
            steps = [c for c in training_calls(ctx, scope) if standalone(ctx, c)]
            for call in calls + steps:
                found = loop_over_losses(ctx, scope, call)
                if found is not None:
                    yield _merge_loop(self, ctx, scope, call, *found)
            calls = sorted(calls + steps, key=lambda c: (c.node.lineno, c.node.col_offset)) if steps else calls
            if len(calls) < 2:
                continue
            merged, following = set[int](), same_pass_later(ctx, scope, [ctx.statement_of(c.node) for c in calls])
            for index, call in enumerate(calls):
                if id(call.node) in merged or retains_graph(call):
                    continue
                later = next_sharing(ctx, scope, call, [calls[i] for i in following[index]])  # only those can run after it in its pass
                if later is None:
                    continue
                partner, origins = later
                if _gan_step(ctx, scope, call, partner):
                    continue
                if call.kind == "call" or partner.kind == "call":
                    yield _across_calls(self, ctx, scope, call, partner, origins)
                    continue
                chain = mergeable_chain(ctx, scope, call, calls[index + 1 :])
                if chain:
                    diagnostic = _merge(self, ctx, scope, chain, origins)
                    if diagnostic is not None:
                        merged.update(id(c.node) for c in chain)
                        yield diagnostic
                        continue
                yield _retain(self, ctx, scope, call, partner, origins)


def _reads(expr: ast.expr, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in walk(expr))


def _merge_loop(rule: Rule, ctx: FileContext, scope: Scope, call: BackwardCall, loop: ast.For, tests: list[ast.expr]) -> Diagnostic:
    items = ctx.text(loop.iter)
    if items.endswith(".items()") and not tests:
        items = items[: -len(".items()")] + ".values()"
    value = loop_value(loop)
    condition = " and ".join(f"({ctx.text(t)})" if len(tests) > 1 and isinstance(t, ast.BoolOp) else ctx.text(t) for t in tests)
    total = f"sum({items})" if not tests else f"sum({value} for {ctx.text(loop.target)} in {items} if {condition})"
    once, edits = f"{total}.backward()", []
    argument = backward_wrapper_argument(ctx, scope, call) if call.kind == "call" else None
    if call.kind == "call" and (argument is None or any(_reads(a, bound_in([loop.target])) for a in call.node.args if a is not argument)):
        pass  # the function does more than backpropagate, or another argument reads the loop's variables
    elif ctx.is_own_line(loop) and len(loop.body) == 1:  # other statements: the author places the sum
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


def _gan_step(ctx: FileContext, scope: Scope, call: BackwardCall, partner: BackwardCall) -> bool:
    """GF103 reports the real cause here (a discriminator step on an undetached fake); its fix
    makes the graphs independent, so adding retain_graph would only hide it. "Here": in this scope,
    in the innermost loop around both backward calls (a GAN loop elsewhere in a module is another matter)."""
    lines = undetached_fake_lines(ctx)
    if not lines:
        return False
    loops = [n for n in scope_nodes(scope) if isinstance(n, LOOPS)]
    shared = [loop for loop in enclosing_loops(ctx, call.node, scope) if loop.lineno <= partner.node.lineno <= loop.end_lineno]
    around_calls = shared[0] if shared else None
    owners = [s.node for s in scopes(ctx)]
    return any(_innermost(owners, line) is scope.node and _innermost(loops, line) is around_calls for line in lines)


def _innermost(nodes: list[ast.AST], line: int) -> Optional[ast.AST]:
    """The innermost of nested ``nodes`` around ``line`` (a module is around every line)."""
    around = [n for n in nodes if isinstance(n, ast.Module) or n.lineno <= line <= n.end_lineno]
    return max(around, key=lambda n: getattr(n, "lineno", 0), default=None)


def _merge(rule: Rule, ctx: FileContext, scope: Scope, chain: list[BackwardCall], origins: frozenset[Origin]) -> Optional[Diagnostic]:
    """One ``(a + b).backward()`` at the first call (or the last, when a loss is computed between)."""
    stmts = [backward_unit(ctx, c) for c in chain]
    if not all(ctx.is_own_line(s) for s in stmts):
        return None
    host = next((i for i in (0, len(chain) - 1) if all_available_at(ctx, scope, chain, chain[i])), None)
    if host is None:
        return None
    total = " + ".join(_operand(ctx, c.target, i) for i, c in enumerate(chain))
    receiver = chain[host].node.func.value
    start, end = ctx.span(receiver)
    grouped = ctx.source[start - 1 : start] == "(" and ctx.source[end : end + 1] == ")"  # `(a * 0.5).backward()`
    edits = [Edit(start, end, total if grouped else f"({total})")]
    edits += [_delete_line(ctx, s) for i, s in enumerate(stmts) if i != host]
    names = ", ".join(f"`{ctx.text(c.target)}`" for c in chain)
    return rule.diagnostic(
        ctx,
        chain[0].node,
        f"{names} share the graph of {_describe(ctx, origins)}; the first backward frees it and the next raises "
        f"'backward through the graph a second time'. Backpropagate the sum once: `({total}).backward()`",
        edits,
        Applicability.SAFE,
        title=f"Backpropagate `({total})` once",
    )


def _retain(rule: Rule, ctx: FileContext, scope: Scope, call: BackwardCall, partner: BackwardCall, origins: frozenset[Origin]) -> Diagnostic:
    stmt, other = ctx.statement_of(call.node), ctx.statement_of(partner.node)
    between = [n for n in scope_nodes(scope) if isinstance(n, ast.stmt) and strictly_between(n, stmt, other) and not strictly_inside(ctx, other, n)]
    effect = gradient_effect(ctx, scope, between)
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
    if summed is not None:
        total = " + ".join(_operand(ctx, a, i) for i, a in enumerate(summed))
        return rule.diagnostic(
            ctx,
            call.node,
            f"{first} and {second} backpropagate through the shared graph of {_describe(ctx, origins)}; the first "
            f"frees it and the second raises 'backward through the graph a second time'. The function only "
            f"backpropagates its argument: call it once with the sum `{total}`",
            [Edit(*ctx.span(summed[0]), total), _delete_line(ctx, ctx.statement_of(partner.node))],
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


def _delete_line(ctx: FileContext, stmt: ast.stmt) -> Edit:
    """Remove the statement's lines, keeping a trailing comment as a line of its own."""
    start, end = ctx.line_start(stmt.lineno), ctx.line_end(stmt.end_lineno)
    tail = ctx.source[ctx.offset(stmt.end_lineno, stmt.end_col_offset) : end].strip()
    text = f"{ctx.indent_of(stmt.lineno)}{tail}{ctx.newline}" if tail.startswith("#") else ""
    return Edit(start, end, text)
