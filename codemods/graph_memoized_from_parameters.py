"""## What it does
Finds a method that memoizes on its object a tensor computed only from the object's own trainable
parameters (`self.table = torch.arange(n)[:, None] * self.freqs`, returned by later calls through
`if self.table is not None: return self.table`), when a training loop runs the method and
backpropagates through the memo in every iteration.

## Why is this bad?
The memo is a graph of the parameters, built by the first call. Every later call returns that
same tensor: the second iteration's `backward()` walks the graph the first one freed ("Trying to
backward through the graph a second time"), and the memo never follows the optimizer's updates.
Detaching the memo runs, but then the parameters get no gradient from it and stay as they were.

## Example
```python
def forward(self, n):
    if self.table is not None:
        return self.table[:n]
    table = torch.arange(n)[:, None] * self.freqs
    self.table = table
    return table
```

## Use instead
Memoize only while the parameters do not train:
```python
    if not self.freqs.requires_grad:
        self.table = table
```
Frozen parameters keep the memo (it holds no graph); trainable ones are read afresh at every call.
Offered only when the method does not read the field after storing it (it returns its local
value); otherwise the memo is reported without a fix.

## Fix safety
Unsafe. The original raises at the second backward. After the fix every call recomputes the value
from the current parameters, which is what training needs, at the cost of the computation the
memo saved.
"""

from __future__ import annotations

from collections.abc import Iterator

from fixer.analysis.loop_reach import loop_line
from fixer.analysis.parameter_memos import WalkedMemo, read_after, walked_memos
from fixer.context import FileContext
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class GraphMemoizedFromParameters(Rule):
    code = "GF112"
    name = "graph-memoized-from-parameters"
    summary = "A method memoizes a graph of the object's trainable parameters and returns it to later calls"
    fix_safety = "unsafe"
    also_needs = b"Parameter"  # with a backward call (or a step function's import): the loop it trains in

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for found in walked_memos(ctx):
            field = f"{found.method.self_name}.{found.attr}"
            message = (
                f"`{field}` memoizes a graph of {', '.join(f'`{p}`' for p in found.parameters)} that later calls return: "
                f"the loop at {loop_line(found.loop, found.loop_in)} backpropagates through the first iteration's freed graph "
                f"(and the memo never follows the updates); memoize it only while the parameters do not train"
            )
            edit = _store_when_frozen(ctx, found)
            if edit is None:
                yield self.diagnostic(ctx, found.store, message)
                continue
            yield self.diagnostic(ctx, found.store, message, [edit], Applicability.UNSAFE,
                                  title=f"Store `{field}` only while its parameters are frozen")


def _store_when_frozen(ctx: FileContext, found: WalkedMemo) -> Edit | None:
    """Guard the store; only when the method never reads the field after it (it returns its
    local value), since the guarded field stays empty while the parameters train."""
    store = found.store
    if not ctx.is_own_line(store) or store.lineno != store.end_lineno or read_after(ctx, found.method, found.attr, store):
        return None
    trains = " or ".join(f"{p}.requires_grad" for p in found.parameters)
    test = f"not {trains}" if len(found.parameters) == 1 else f"not ({trains})"
    indent = ctx.indent_of(store.lineno)
    text = f"{indent}if {test}:{ctx.newline}{indent}{ctx.indent_unit}{ctx.text(store)}{ctx.newline}"
    return Edit(ctx.line_start(store.lineno), ctx.line_end(store.lineno), text)
