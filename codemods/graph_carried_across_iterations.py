"""## What it does
Finds a tensor that is carried from one training iteration into the next together with its
autograd graph: recurrent state (`out, hidden = rnn(x, hidden)`, an LSTM's `(h, c)`), a
`self.memory` attribute of a `train_step` method, or a list/deque that caches activations
(`cache.append(h)` read later as `cache[0]`), when the loop backpropagates every iteration and
the carried value feeds the next iteration's loss.

## Why is this bad?
The first `backward()` frees the graph behind the carried tensor. The next iteration builds on
that tensor, so its `backward()` walks into the freed graph and raises
`RuntimeError: Trying to backward through the graph a second time`. Adding
`retain_graph=True` silences the error but keeps every past iteration's graph alive (memory
grows without bound) and backpropagates into stale graphs built with old parameters.

## Example
```python
hidden = torch.zeros(1, 4, 8)
for x, y in batches:
    out, hidden = rnn(x, hidden)
    loss = criterion(head(out), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
```

## Use instead
Cut the history where it crosses the iteration boundary (truncated backpropagation through
time), keeping the value:
```python
for x, y in batches:
    hidden = hidden.detach()  # for an LSTM: hidden = tuple(h.detach() for h in hidden)
    out, hidden = rnn(x, hidden)
```
For a cache, store the detached value: `cache.append(h.detach())`.

## Fix safety
Safe when the loop's backward has no `retain_graph`: gradient then stops at the iteration
boundary, and the only gradients that change are those the carried value would have sent into
earlier iterations' computation, which the original program never produced (it raises at its
second backward; the exception is a history built only from operations that save nothing, such
as additions, where the original summed gradients over all past iterations). Unsafe when
`retain_graph=True` is also removed from the backward: that band-aid backpropagated into every
stale graph, so parameter gradients lose those contributions. Unsafe for a cache read in the same
iteration after the store: the current iteration's entry loses its gradient too. No fix when it
cannot tell whether the value is a tensor or a tuple, or whether it exists before the loop.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.calls import backward_calls
from fixer.analysis.carried import CarriedValue, carried_values
from fixer.analysis.carried_flow import inside
from fixer.analysis.graph import Kind, facts
from fixer.analysis.names import dotted
from fixer.analysis.scopes import scopes
from fixer.context import FileContext
from fixer.rule import Applicability, Diagnostic, Edit, Rule

ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)


class GraphCarriedAcrossIterations(Rule):
    code = "GF101"
    name = "graph-carried-across-iterations"
    summary = "A tensor carried into the next iteration keeps the graph the last backward freed"
    fix_safety = "mixed"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in scopes(ctx):
            for value in carried_values(ctx, scope):
                yield self._report(ctx, scope, value)

    def _report(self, ctx: FileContext, scope, value: CarriedValue) -> Diagnostic:
        if value.container:
            node = value.stores[0][0]
            edits = _store_edits(ctx, scope, value)
            fix = f"`{value.name}` stores detached values"
            unsafe = value.read_after_store
        else:
            node = value.use
            edits = _boundary_edits(ctx, value)
            fix = f"`{_cut_line(value) or value.name + ' = ' + value.name + '.detach()'}` at the start of the iteration"
            unsafe = False
        band_aid = _band_aid(ctx, scope, value) if edits else None
        if band_aid is not None:
            edits.append(band_aid)
            unsafe = True
        message = (
            f"`{value.name}` carries its autograd graph into the next iteration, whose backward walks the graph "
            f"this iteration's backward freed; cut it: {fix}"
        )
        applicability = Applicability.UNSAFE if unsafe else Applicability.SAFE
        return self.diagnostic(ctx, node, message, edits, applicability, title=f"Detach `{value.name}` at the iteration boundary")


def _cut_line(value: CarriedValue) -> Optional[str]:
    name = value.name
    if value.shape == "tensor":
        return f"{name} = {name}.detach()"
    if value.shape == "tuple":
        item = "t" if name == "h" else "h"
        return f"{name} = tuple({item}.detach() for {item} in {name})"
    return None


def _boundary_edits(ctx: FileContext, value: CarriedValue) -> list[Edit]:
    """Insert the cut before the statement of the iteration body that first reads the value."""
    line = _cut_line(value)
    if line is None or not value.defined_before:
        return []
    stmt = _body_statement(ctx, value.iteration.node, value.read)
    if stmt is None or not ctx.is_own_line(stmt):
        return []
    if isinstance(value.initial, ast.Constant) and value.initial.value is not None:
        return []  # starts as a number: not a tensor on the first pass
    guard = value.initial is None or isinstance(value.initial, ast.Constant)
    if guard and _is_not_none_test(stmt, value.name) and ctx.is_own_line(stmt.body[0]):
        stmt, guard = stmt.body[0], False  # `if hidden is not None:` already guards: cut first thing inside
    indent = ctx.indent_of(stmt.lineno)
    nl = ctx.newline
    text = f"{indent}if {value.name} is not None:{nl}{indent}    {line}{nl}" if guard else f"{indent}{line}{nl}"
    start = ctx.line_start(stmt.lineno)
    return [Edit(start, start, text)]


def _is_not_none_test(stmt: ast.stmt, name: str) -> bool:
    test = getattr(stmt, "test", None)
    return (
        isinstance(stmt, ast.If)
        and isinstance(test, ast.Compare)
        and dotted(test.left) == name
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.IsNot)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    )


def _body_statement(ctx: FileContext, iteration: ast.AST, node: ast.AST) -> Optional[ast.stmt]:
    for parent in [node, *ctx.ancestors(node)]:
        if any(parent is s for s in iteration.body):
            return parent
    return None


def _store_edits(ctx: FileContext, scope, value: CarriedValue) -> list[Edit]:
    graph = facts(ctx, scope)
    edits = []
    for stmt, stored in value.stores:
        parts = stored.elts if isinstance(stored, ast.Tuple) else [stored]
        for part in parts:
            if graph.kind(part, stmt) != Kind.GRAPH:
                continue
            text = ctx.text(part)
            start, end = ctx.span(part)
            edits.append(Edit(start, end, f"{text}.detach()" if isinstance(part, ATOMS) else f"({text}).detach()"))
    return edits


def _band_aid(ctx: FileContext, scope, value: CarriedValue) -> Optional[Edit]:
    """Remove ``retain_graph=True`` from the iteration's only backward call."""
    call = value.iteration.backward
    keyword = call.keyword("retain_graph")
    if keyword is None or call.flag("retain_graph") is not True:
        return None
    inside_iteration = [c for c in backward_calls(ctx, scope) if inside(ctx, c.node, value.iteration.node)]
    if len(inside_iteration) != 1:
        return None
    arguments = [*call.node.args, *call.node.keywords]
    index = next(i for i, a in enumerate(arguments) if a is keyword)
    start, end = ctx.span(keyword)
    if index > 0:
        start = ctx.span(arguments[index - 1])[1]
    elif len(arguments) > 1:
        end = ctx.span(arguments[1])[0]
    return Edit(start, end, "")
