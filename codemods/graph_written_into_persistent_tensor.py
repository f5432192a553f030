"""## What it does
Finds a tensor an object makes once (`self.cache = torch.zeros(...)` or a buffer, in
`__init__`) into which a method writes a graph-carrying value in place (`self.cache[:, i] = k`,
`self.bank[c] = m * self.bank[c] + (1 - m) * mean`, `self.memory.copy_(h)`), when a training
loop runs that method in every iteration and backpropagates a loss computed from the tensor.

## Why is this bad?
An in-place write makes the tensor part of the current graph, on top of its previous version.
The tensor outlives the iteration, so the next iteration's write stacks onto the previous
iteration's write: the second `backward()` walks into the graph the first one freed ("Trying to
backward through the graph a second time"), and the history of every step stays reachable.

## Example
```python
class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = nn.Linear(8, 8)
        self.cache = torch.zeros(4, 16, 8)

    def forward(self, x):
        self.cache[:, : x.size(1)] = self.k(x)
        return self.cache[:, : x.size(1)].softmax(-1)
```

## Use instead
Cut the tensor's history when the method starts, and keep this call's write:
```python
    def forward(self, x):
        self.cache = self.cache.detach()
        self.cache[:, : x.size(1)] = self.k(x)
        return self.cache[:, : x.size(1)].softmax(-1)
```
The gradient still flows from what reads the tensor into the values this call writes; only the
link to earlier calls is cut. Detaching the written value (`self.k(x).detach()`) or writing under
`torch.no_grad()` would stop that gradient, and `retain_graph=True` keeps every step's graph.

## Fix safety
Unsafe. The original raises at the second backward. When the method runs several times before
one backward (two forward passes per step), the later calls no longer pass gradient into the
earlier calls' writes.
"""

from __future__ import annotations

from collections.abc import Iterator

from fixer.analysis.loop_reach import loop_line
from fixer.analysis.persistent_writes import HistoryWrite, walked_histories
from fixer.analysis.statement_moves import is_docstring
from fixer.context import FileContext
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class GraphWrittenIntoPersistentTensor(Rule):
    code = "GF111"
    name = "graph-written-into-persistent-tensor"
    summary = "A graph written in place into a tensor kept across iterations chains every step's graph"
    fix_safety = "unsafe"
    also_needs = b"def __init__"  # with a backward call (or a step function's import): the loop it trains in

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for found in walked_histories(ctx):
            field = f"{found.method.self_name}.{found.attr}"
            message = (
                f"`{ctx.text(found.write).strip()}` writes a graph into `{field}`, a tensor kept across iterations: "
                f"the next write stacks onto it, and the loop at {loop_line(found.loop, found.loop_in)} backpropagates through "
                f"the previous iteration's freed graph; cut its history when `{found.method.node.name}` starts"
            )
            edit = _detach_at_start(ctx, found, field)
            if edit is None:
                yield self.diagnostic(ctx, found.write, message)
                continue
            yield self.diagnostic(ctx, found.write, message, [edit], Applicability.UNSAFE,
                                  title=f"Detach `{field}` at the start of `{found.method.node.name}`")


def _detach_at_start(ctx: FileContext, found: HistoryWrite, field: str) -> Edit | None:
    body = found.method.node.body
    first = body[1] if len(body) > 1 and is_docstring(body[0]) else body[0]
    if not ctx.is_own_line(first) or first.lineno == found.method.node.lineno:
        return None
    start = ctx.line_start(first.lineno)
    return Edit(start, start, f"{ctx.indent_of(first.lineno)}{field} = {field}.detach(){ctx.newline}")
