"""## What it does
Finds a tensor that is carried from one training iteration into the next together with its
autograd graph: recurrent state (`out, hidden = rnn(x, hidden)`, an LSTM's `(h, c)`), a
`self.memory` attribute of a `train_step` method, a list/deque that caches activations
(`cache.append(h)` read later as `cache[0]`) or a tensor buffer written in place
(`bank[i] = feat` into `bank = torch.zeros(n, d)`), when the loop backpropagates every iteration and
the carried value feeds the next iteration's loss. The backward may run in a step function the
loop calls (`loss, hidden = train_step(x, hidden)`, of this file or another project file) when
that function backpropagates on every call and its loss is built from the argument it is given.
The step function itself is one iteration when it backpropagates once per call and the loop
hands it back what it returned (`previous, value = step(x, previous)` with `return prediction,
...`) or the same list or buffer on every call (`step(batch, memory)` appending to `memory`).

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
A state dict of tensors (`{"deter": h, "stoch": z}`, handed back by a trainer method) is cut as
`state = {k: v.detach() for k, v in state.items()}`.
For a cache, store the detached value: `cache.append(h.detach())` (also for
`self.memory.append(self.h)` when `self.h` feeds this iteration's loss too: emptying the cache
would change what it holds). For per-episode buffers whose entries reach the loss only through
the list (REINFORCE's `saved_log_probs`), empty them at the start of each iteration (`saved_log_probs.clear()`, with the lists filled alongside it); when an
agent's `act` method fills `self.log_probs` for its `learn` method (or `select_action` fills
`policy.saved_log_probs` for `finish_episode`), they are emptied right after that backward (if
nothing reads them later in that call). A total
that starts as a number (`total_loss = 0`, or a project function's `return 0.0`, or a call
graphfix cannot see into before `total += loss`) is cut once it is a tensor
(`if torch.is_tensor(total_loss): total_loss = total_loss.detach()`). A no-op
`for s in state: s.detach()` (each result dropped) is replaced by the cut; when the state may be
a tensor or a tuple, the cut handles both
(`state = state.detach() if torch.is_tensor(state) else tuple(h.detach() for h in state)`).

Not reported: a name the loop's own `for` header binds; a requires-grad leaf passed only through
operations that save no tensors (`x = pts.clone().requires_grad_().to(dev)`: nothing to free);
a name unbound before the loop and defined before the read under `if`/`elif` tests that read
nothing the loop rebinds (every pass takes the same arm), or in the body of an inner `for` (the
program relies on it running: an empty one would fail on the first pass); an arm that leaves the pass
(`continue`, `break`, `return`, `raise`) counts as defining; `for s in state: s.detach_()`
before the read cuts the state in place.

## Fix safety
Safe when the loop's backward has no `retain_graph`: gradient then stops at the iteration
boundary, and the only gradients that change are those the carried value would have sent into
earlier iterations' computation, which the original program never produced (it raises at its
second backward; the exception is a history built only from operations that save nothing, such
as additions, where the original summed gradients over all past iterations). Unsafe when
`retain_graph=True` is also removed from the backward: that band-aid backpropagated into every
stale graph, so parameter gradients lose those contributions. Unsafe for a cache read in the same
iteration after the store: the current iteration's entry loses its gradient too. Unsafe when
buffers are emptied: the loss no longer includes earlier iterations' entries. No fix when it
cannot tell whether the value is a tensor or a tuple, or whether it exists before the loop.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.carried import CarriedValue, carried_values
from fixer.analysis.carried_cuts import (
    DETACH_STORES,
    EMPTY_BUFFERS,
    band_aid,
    body_statement,
    cut_kind,
    cut_shape,
    is_not_none_test,
    noop_detach_loop,
    read_after,
    starts_as_number,
    stored_graphs,
    target_read_elsewhere,
)
from fixer.analysis.episode_buffers import episode_buffers
from fixer.analysis.names import torch_alias
from fixer.analysis.scopes import scopes
from fixer.context import FileContext
from fixer.edits.keywords import remove_keyword
from fixer.edits.values import detach_edit, detached_text
from fixer.rule import Applicability, Diagnostic, Edit, Rule


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
        kind = cut_kind(ctx, value)
        if kind == EMPTY_BUFFERS:
            node = value.stores[0][0]
            buffers = episode_buffers(ctx, scope, value)
            edits = _clear_edits(ctx, value, buffers)
            when = "after this call's backward" if value.stored_elsewhere else "at the start of each iteration"
            fix = f"empty {', '.join(f'`{b}`' for b in buffers)} {when}"
            unsafe = True
        elif kind == DETACH_STORES:
            node = value.stores[0][0]
            edits = [detach_edit(ctx, part) for part in stored_graphs(ctx, scope, value)]
            fix = f"`{value.name}` stores detached values"
            unsafe = value.read_after_store
        else:
            node = value.use
            edits = _boundary_edits(ctx, scope, value)
            name = value.name
            fix = f"`{_cut_line(value) or name + ' = ' + name + '.detach()'}` at the start of the iteration"
            if _cut_line(value) is None:
                fix += f" (for a tuple: `{name} = tuple(h.detach() for h in {name})`)"
            unsafe = False
        if edits and band_aid(ctx, scope, value):  # retain_graph=True on the iteration's only backward goes
            edits.append(remove_keyword(ctx, value.iteration.backward.node, "retain_graph"))
            unsafe = True
        message = (
            f"`{value.name}` carries its autograd graph into the next iteration, whose backward walks the graph "
            f"this iteration's backward freed; cut it: {fix}"
        )
        applicability = Applicability.UNSAFE if unsafe else Applicability.SAFE
        return self.diagnostic(ctx, node, message, edits, applicability, title=f"Detach `{value.name}` at the iteration boundary")


def _clear_edits(ctx: FileContext, value: CarriedValue, buffers: list[str]) -> list[Edit]:
    body = value.iteration.body
    if value.stored_elsewhere:
        return _clear_after_backward(ctx, value, buffers)
    first = body[1] if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else body[0]
    if not ctx.is_own_line(first):
        return []
    indent, nl = ctx.indent_of(first.lineno), ctx.newline
    start = ctx.line_start(first.lineno)
    return [Edit(start, start, "".join(f"{indent}{b}.clear(){nl}" for b in buffers))]


def _clear_after_backward(ctx: FileContext, value: CarriedValue, buffers: list[str]) -> list[Edit]:
    """Buffers filled by other methods are emptied once this call's backward has used them, if
    nothing reads them after it."""
    stmt = body_statement(ctx, value.iteration, value.iteration.backward.node)
    if stmt is None or not ctx.is_own_line(stmt) or read_after(value, buffers, stmt):
        return []
    at = ctx.line_end(stmt.end_lineno)
    before = ctx.newline if not ctx.source[:at].endswith(("\n", "\r")) else ""
    indent, nl = ctx.indent_of(stmt.lineno), ctx.newline
    return [Edit(at, at, before + "".join(f"{indent}{b}.clear(){nl}" for b in buffers))]


def _cut_line(value: CarriedValue) -> Optional[str]:
    cut = detached_text(value.name, cut_shape(value))
    return f"{value.name} = {cut}" if cut else None


def _boundary_edits(ctx: FileContext, scope, value: CarriedValue) -> list[Edit]:
    """Insert the cut before the statement of the iteration body that first reads the value."""
    line = _cut_line(value)
    stmt = body_statement(ctx, value.iteration, value.read)
    if stmt is None or not ctx.is_own_line(stmt) or not value.defined_before:
        return []
    torch = torch_alias(ctx)
    if line is None and noop_detach_loop(stmt, value.name) and torch is not None:
        # iterated, so a tensor or a tuple of tensors (an RNN's h or an LSTM's (h, c))
        name = value.name
        line = f"{name} = {name}.detach() if {torch}.is_tensor({name}) else tuple(h.detach() for h in {name})"
    if line is None:
        return []
    if starts_as_number(ctx, scope, value):
        if torch is None:
            return []
        # starts as a number (`total = 0`, or maybe: `total = start()`): a tensor only from the second pass on
        indent, nl, name = ctx.indent_of(stmt.lineno), ctx.newline, value.name
        text = f"{indent}if {torch}.is_tensor({name}):{nl}{indent}{ctx.indent_unit}{name} = {name}.detach(){nl}"
        start = ctx.line_start(stmt.lineno)
        return [Edit(start, start, text)]
    if isinstance(value.initial, ast.Constant) and value.initial.value is not None:
        return []
    guard = value.initial is None or isinstance(value.initial, ast.Constant)
    if guard and is_not_none_test(stmt, value.name) and ctx.is_own_line(stmt.body[0]):
        stmt, guard = stmt.body[0], False  # `if hidden is not None:` already guards: cut first thing inside
    indent = ctx.indent_of(stmt.lineno)
    nl = ctx.newline
    if not guard and noop_detach_loop(stmt, value.name) and not target_read_elsewhere(ctx, stmt):
        # `for s in state: s.detach()` drops every result: the cut takes its place
        return [Edit(ctx.line_start(stmt.lineno), ctx.line_end(stmt.end_lineno), f"{indent}{line}{nl}")]
    text = f"{indent}if {value.name} is not None:{nl}{indent}{ctx.indent_unit}{line}{nl}" if guard else f"{indent}{line}{nl}"
    start = ctx.line_start(stmt.lineno)
    return [Edit(start, start, text)]
