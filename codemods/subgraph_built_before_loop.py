"""## What it does
Finds a tensor computed once before a loop from tensors that require grad (`y = t @ a` with `t`,
`a` leaves with `requires_grad=True` or parameters, `h = encoder(x)`), which every iteration's
loss is built from and backpropagated through.

## Why is this bad?
The graph of `y` is built once and shared by every iteration's graph. The first `backward()`
frees its saved tensors, so the second iteration raises "Trying to backward through the graph a
second time". When an optimizer updates the leaves of `y` in the loop, `y` would also be stale:
it holds the values of the leaves before the first update, so the loss never sees the update.
Only ops that save tensors make this fail (`@`, `*`, `/`, `**`, nonlinearities, module calls,
indexing by a tensor, a list or a mask: `emb = C[X]` saves `X`); `y = a + b`, sums, views, slices
and integer indexing save nothing, can be backpropagated again and are not reported. A tensor made
to require grad after its creation (`for p in [C, W]: p.requires_grad = True`) is a leaf from
then on. Uses under `.detach()` do not count, and a loop of discriminator steps on a generator
output built before it is left to GF103 (the fix there is `fake.detach()`, not a recompute).

"Before the loop" includes the last pass of an earlier loop of the same block (`fake = netG(z)`
in the critic steps, then every generator step backpropagates `netD(fake)` and steps the
generator): the value is built once and then reused by every iteration; its copy at the top of
the loop reads the same inputs when nothing rebinds them after it.

The loop's backward may run under a periodic guard (`if step % k == 0:`, many passes) or in a
step function it calls (`loss = train_step(y)`, a function of
this file or of another project file that backpropagates on every call, or on every k-th call
under `if step % k == 0:` when the loop passes its counter and runs more than k passes). A graph built once in
`__init__` (`self.gram = self.factor @ self.factor.t()`) and backpropagated through by a method
that this file calls in a loop fails the same way on the method's second call, and so does a
graph built once by the module or a function and given to the constructor of an object that
keeps it (`Trainer(data)` storing `self.data = data`), wherever that one construction sits (in an
epoch loop, every object gets the same graph).

## Example
```python
y = t @ a
for _ in range(2):
    loss = measure(t @ (x + y), x)
    loss.backward()
```

## Use instead
Recompute `y` in the loop, right before its first use:
```python
for _ in range(2):
    y = t @ a
    loss = measure(t @ (x + y), x)
    loss.backward()
```
The assignment is moved (copied when `y` is also used outside the loop). It is recomputed when
it is a plain expression of tensor ops on names the loop does not rebind, or when it calls
modules, or project functions (of this file or imported) that only return an expression of
tensor ops and calls of their parameters (`return criterion(out, y)`), and the loop updates its
leaves (an optimizer step or an in-place update). Otherwise the
loop's `backward()` gets `retain_graph=True`, which keeps the shared graph alive and gives the
same gradients. `y.detach()` is never the fix: it stops the gradient to `t` and `a`
(`a.grad` stays None).

## Fix safety
Recomputing a plain tensor expression is safe: without updates of its leaves the values and all
gradients equal those of `retain_graph=True`; with updates every iteration uses the current
leaves, which is what the loop means. Recomputing an `__init__` value at the start of the method
is unsafe for the same reasons (it reads only `self` and imported names; otherwise there is no fix).
Recomputing an expression with module or helper calls is unsafe:
dropout draws a new mask every iteration (the random stream shifts) and batch norm updates its
running statistics every iteration. `retain_graph=True` is unsafe: gradients are unchanged, but
every iteration's graph is kept alive until the next one replaces it.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.built_before_loop import recompute_kind, saving_from_trainable, updates_leaves, walked_after_loop
from fixer.analysis.calls import BackwardCall
from fixer.analysis.graph import facts
from fixer.analysis.init_graphs import given_graphs, init_graphs
from fixer.analysis.loop_subgraphs import (
    BuiltOnce,
    built_once_graphs,
    first_use_statement,
    holder_bindings,
    method_bound_names,
    only_backward_in,
    original_unneeded,
    reads_only_self,
    top_level_chain,
)
from fixer.analysis.scopes import Scope, scopes
from fixer.analysis.statement_moves import is_docstring
from fixer.context import FileContext
from fixer.edits.keywords import keyword_edit, remove_keyword
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class SubgraphBuiltBeforeLoop(Rule):
    code = "GF102"
    name = "subgraph-built-before-loop"
    summary = "A graph built once before a loop is backpropagated through in every iteration"
    fix_safety = "mixed"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in scopes(ctx):
            for found in built_once_graphs(ctx, scope):
                yield self._report(ctx, scope, found)
            for name, stmt, _ in init_graphs(ctx, scope, saving_from_trainable):
                method = scope.node.name
                message = (
                    f"`{name} = {ctx.text(stmt.value)}` is built once in `__init__` and backpropagated through by "
                    f"every call of `{method}`: the first call's backward frees its graph, the second fails"
                )
                edits = _at_method_start(ctx, scope, [ctx.text(stmt)]) if reads_only_self(ctx, scope, stmt) else []
                if not edits:
                    yield self.diagnostic(ctx, stmt, f"{message}; compute it in `{method}` (keep only its inputs on `self`)")
                    continue
                yield self.diagnostic(ctx, stmt, f"{message}; recompute it at the start of `{method}`", edits,
                                      Applicability.UNSAFE, title=f"Recompute `{name}` in `{method}`")

            for name, stmt, _ in given_graphs(ctx, scope, saving_from_trainable):
                method, cls = scope.node.name, scope.class_node.name
                message = (
                    f"`{ctx.text(stmt)}` is built once, kept by `{cls}` as `{name}` and backpropagated through by "
                    f"every call of `{method}`: the first call's backward frees its graph, the second fails"
                )
                edits = _recompute_given(ctx, scope, name, stmt)
                if not edits:
                    yield self.diagnostic(ctx, stmt, f"{message}; compute it in `{method}`")
                    continue
                yield self.diagnostic(ctx, stmt, f"{message}; recompute it at the start of `{method}`", edits,
                                      Applicability.UNSAFE, title=f"Recompute `{name}` in `{method}`")

    def _report(self, ctx: FileContext, scope: Scope, found: BuiltOnce) -> Diagnostic:
        graph = facts(ctx, scope)
        name, stmt, loop = found.name, found.stmt, found.loop
        expression = ctx.text(stmt.value)
        message = (
            f"`{name} = {expression}` is built once before the loop and backpropagated through in every "
            f"iteration: the first backward frees its graph, the second fails"
        )
        recompute = recompute_kind(ctx, graph, scope, stmt, loop)
        if found.band_aid:
            message = (f"`{name} = {expression}` is built once before the loop and kept with `retain_graph=True` "
                       f"while the loop updates its inputs: every iteration backpropagates through stale values")
        if recompute is not None and not walked_after_loop(ctx, scope, name, loop):
            edits = _recompute_edits(ctx, scope, found)
            if edits and found.band_aid and only_backward_in(ctx, loop):  # nothing else needs the graph kept
                edits += [remove_keyword(ctx, c.node, "retain_graph") for c in found.calls if c.flag("retain_graph") is True]
            if edits:
                constructs = any(isinstance(h.value, ast.Call) for h in holder_bindings(ctx, scope, found) or [])
                safety = Applicability.SAFE if recompute == "pure" and not constructs else Applicability.UNSAFE
                return self.diagnostic(ctx, stmt, f"{message}; recompute `{name}` in the loop", edits, safety,
                                       title=f"Recompute `{name}` inside the loop")
        if not updates_leaves(ctx, graph, scope, stmt.value, loop) and all(c.kind != "call" for c in found.calls):
            edits = [edit for call in found.calls if (edit := _retain_graph_edit(ctx, call))]
            if len(edits) == len(found.calls):
                return self.diagnostic(ctx, stmt, f"{message}; keep it with `retain_graph=True`", edits,
                                       Applicability.UNSAFE, title="Pass `retain_graph=True` to the loop's backward")
        if walked_after_loop(ctx, scope, name, loop):
            return self.diagnostic(ctx, stmt, f"{message}; a backward after the loop walks `{name}` too: detach it where the "
                                   "loop's backward reads it, or build it again for each backward")
        return self.diagnostic(ctx, stmt, f"{message}; compute `{name}` inside the loop")


def _recompute_given(ctx: FileContext, scope: Scope, name: str, stmt: ast.Assign) -> list[Edit]:
    """``self.y = t @ a`` at the start of the method when the module-level value reads only names
    the module binds once at its top level (or imports) and the method does not bind. A name
    that is itself a graph built at the top level (``output = model(x)`` behind
    ``loss = criterion(output, y)``) is recomputed first, as a local of the method."""
    chain = top_level_chain(ctx, stmt, method_bound_names(scope), set()) if ctx.parent(stmt) is ctx.tree else None
    if chain is None:
        return []
    lines = [f"{target} = {ctx.text(value)}" for target, value in chain]
    return _at_method_start(ctx, scope, lines + [f"{name} = {ctx.text(stmt.value)}"])


def _at_method_start(ctx: FileContext, scope: Scope, lines: list[str]) -> list[Edit]:
    """Insert ``lines`` before the method's first statement (after its docstring)."""
    body = scope.node.body
    first = body[1] if len(body) > 1 and is_docstring(body[0]) else body[0]
    if not ctx.is_own_line(first):
        return []
    start = ctx.line_start(first.lineno)
    indent = ctx.indent_of(first.lineno)
    text = "".join(f"{indent}{line}{ctx.newline}" for line in lines)
    return [Edit(start, start, text)]


def _recompute_edits(ctx: FileContext, scope: Scope, found: BuiltOnce) -> list[Edit]:
    """Insert the assignment before the loop statement holding the first use; delete the original
    when nothing outside the loop reads it."""
    stmt, loop = found.stmt, found.loop
    target = first_use_statement(ctx, scope, found)
    holders = holder_bindings(ctx, scope, found)  # out = {"loss": loss}: rebuilt after it
    if target is None or holders is None or target.lineno == loop.lineno or not all(ctx.is_own_line(s) for s in [target, stmt, *holders]):
        return []
    old, new = ctx.indent_of(stmt.lineno), ctx.indent_of(target.lineno)
    lines = [line for s in [stmt, *holders] for line in ctx.lines[s.lineno - 1 : s.end_lineno]]
    text = "".join(new + line[len(old):] if line.startswith(old) else line for line in lines)
    if not text.endswith(("\n", "\r")):
        text += ctx.newline
    edits = [Edit(ctx.line_start(target.lineno), ctx.line_start(target.lineno), text)]
    if original_unneeded(ctx, scope, found):  # else copied (a holder's binding reads it)
        edits.append(Edit(ctx.line_start(stmt.lineno), ctx.line_end(stmt.end_lineno), ""))
    return edits


def _retain_graph_edit(ctx: FileContext, call: BackwardCall) -> Optional[Edit]:
    if call.keyword("retain_graph") is not None:
        return None  # retain_graph=False written out: the author decided
    return keyword_edit(ctx, call.node, "retain_graph")
