"""## What it does
Finds `with torch.nn.utils.parametrize.cached():` entered around a training loop whose every
iteration backpropagates, in a file that parametrizes a module (`orthogonal(layer)`,
`weight_norm`, `spectral_norm`, `register_parametrization`).

## Why is this bad?
Inside the context a parametrized weight is computed on its first access and reused until the
context exits. Around the loop, the first iteration builds the weight's graph and every later
iteration reuses it: the first `backward()` frees it, the second raises "Trying to backward
through the graph a second time". With `retain_graph=True` it runs, but every step reads the
weight from before the first optimizer update, so training is wrong.

## Example
```python
with parametrize.cached():
    for x, y in batches:
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
```

## Use instead
Enter the cache for one step, inside the loop:
```python
for x, y in batches:
    with parametrize.cached():
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
```
The loop is the innermost loop around the backward; everything else the context held runs
outside it. Not fixed: a context with several items or an `as` name, a loop with an `else`, code
that the move cannot re-indent line by line (multi-line strings, comments at other depths).

## Fix safety
Safe. The original raises at its second backward; the fix only bounds the cache to one step, so
each step computes the weight once from the current parameters, which is what the cache is for.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.parametrize_cache import cached_across_iterations
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class ParametrizationCachedAcrossSteps(Rule):
    code = "GF109"
    name = "parametrization-cached-across-steps"
    summary = "parametrize.cached() entered around a training loop reuses the first step's weight graph"
    fix_safety = "safe"
    also_needs = b"cached"  # parametrize.cached(), with a backward call (or a step function's import) in its loop

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for statement, loop in cached_across_iterations(ctx):
            context = ctx.text(statement.items[0].context_expr)
            message = (
                f"`with {context}` holds every parametrized weight from the loop's first iteration: the first "
                f"backward frees its graph, the second fails (and every step reads the weight from before the "
                f"first update); enter the cache inside the loop, once per step"
            )
            edit = _per_step(ctx, statement, loop)
            if edit is None:
                yield self.diagnostic(ctx, statement, message)
                continue
            yield self.diagnostic(ctx, statement, message, [edit], Applicability.SAFE,
                                  title=f"Enter `{context}` once per iteration")


def _per_step(ctx: FileContext, statement: ast.With, loop: ast.AST) -> Optional[Edit]:
    """The with statement's body one level out, with the context around the loop's body."""
    if len(statement.items) != 1 or statement.items[0].optional_vars is not None or getattr(loop, "orelse", None):
        return None
    if statement.items[0].context_expr.end_lineno != statement.lineno or not ctx.is_own_line(statement):
        return None
    if any(isinstance(n, (ast.Constant, ast.JoinedStr)) and n.lineno != n.end_lineno for n in walk(statement)):
        return None
    outer, inner = ctx.indent_of(statement.lineno), ctx.indent_of(statement.body[0].lineno)
    unit = inner[len(outer):]
    first, last = loop.body[0].lineno, loop.body[-1].end_lineno
    if not inner.startswith(outer) or not unit or first == loop.lineno:
        return None
    lines: list[str] = []
    for number in range(statement.lineno + 1, statement.end_lineno + 1):
        line = ctx.lines[number - 1]
        if line.strip() and not line.startswith(inner):
            return None
        line = outer + line[len(inner):] if line.strip() else line
        if number == first:
            header = ctx.indent_of(loop.body[0].lineno)[len(unit):]
            lines.append(f"{header}with {ctx.text(statement.items[0].context_expr)}:{ctx.newline}")
        lines.append(unit + line if first <= number <= last and line.strip() else line)
    text = "".join(lines)
    if not text.endswith(("\n", "\r")):
        text += ctx.newline
    return Edit(ctx.line_start(statement.lineno), ctx.line_end(statement.end_lineno), text)
