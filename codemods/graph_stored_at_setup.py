"""## What it does
Finds a field that the object's setup stores once as a graph built from a tensor that requires
grad (`self.scale = torch.exp(nn.Parameter(torch.zeros(1)))`, `self.gram = self.w @ self.w.t()`,
`self.reg = self.penalty()` where `penalty` sums terms of the weights, looping over
`self.parameters()` or over a field of parameter groups). The setup is `__init__`, or a method
the file calls only outside loops, from code that itself runs once (`model.compile()` at the top
of the script, `setup()` called by `main()`),
when a training loop's every-iteration backward walks it: the loss is computed from the field,
directly or through the methods and the held modules the loop calls (`model.nll()` running
`self.kernel(x, x)`, whose `forward` reads the field; a step function or trainer method the loop
calls, backpropagating on every call; a field read through an instance, `corpus.vectors`, or
sliced by a generator method whose items the loop iterates). The value may come from a module the
object is handed (`self.vectors = embedding(ids)`). No other code assigns the field. A field that a method of
its own class reads and backpropagates through on every call is GF102's (it recomputes it at the
start of that method).

## Why is this bad?
The field's graph is built once, when the object is set up. The first iteration's `backward()`
frees it, the second raises "Trying to backward through the graph a second time". Even with
`retain_graph=True` the value never follows the optimizer's updates. A parameter created inside
the expression (`torch.exp(nn.Parameter(...))`) is worse: the object never registers it, so no
optimizer ever sees it.

## Example
```python
class Kernel(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.exp(nn.Parameter(torch.zeros(1)))

    def forward(self, x):
        return x / self.scale
```

## Use instead
Keep only the leaf on the object and compute the graph where it is read:
```python
class Kernel(nn.Module):
    def __init__(self):
        super().__init__()
        self.raw_scale = nn.Parameter(torch.zeros(1))

    scale = property(lambda self: torch.exp(self.raw_scale))
```
The fix turns the field into a property that computes the value from the current leaves at each
read. A parameter created in the expression becomes a registered field `raw_<field>` (only in an
`nn.Module`, which registers it). Reported without a fix when the value reads names other than
the object and imported modules, or when a name the fix needs is taken.

## Fix safety
Unsafe. The original raises at the second backward. After the fix every read builds a new graph
from the current parameters, so gradients reach them at every step; a parameter created in the
expression is now registered, so `model.parameters()` (and the optimizer built from it) includes
it and trains it: that changes training on purpose.
"""

from __future__ import annotations

import ast
import re
from typing import Iterator

from fixer.analysis.bindings import imported_names, module_classes
from fixer.analysis.class_model import class_methods
from fixer.analysis.loop_reach import loop_line
from fixer.analysis.names import qualified
from fixer.analysis.setup_graphs import WalkedSetupGraph, walked_setup_graphs
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.rule import Applicability, Diagnostic, Edit, Rule

PARAMETER = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})


class GraphStoredAtSetup(Rule):
    code = "GF110"
    name = "graph-stored-at-setup"
    summary = "A graph stored on an object by its setup is backpropagated through by every training iteration"
    fix_safety = "unsafe"
    also_needs = b"def __init__"  # a class, with a backward call (or a step function's import): the loop it trains in

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for found in walked_setup_graphs(ctx):
            stmt = found.store.stmt
            message = (
                f"`{ctx.text(stmt)}` builds a graph once, when the object is set up, and the loop at "
                f"{loop_line(found.loop, found.loop_in)} backpropagates through it in every iteration: the first backward frees it, "
                f"the second fails"
            )
            edits = _as_property(ctx, found)
            if not edits:
                yield self.diagnostic(ctx, stmt, f"{message}; compute it where it is read")
                continue
            yield self.diagnostic(ctx, stmt, f"{message}; compute it at each read (a property)", edits,
                                  Applicability.UNSAFE, title=f"Make `{found.attr}` a property")


def _as_property(ctx: FileContext, found: WalkedSetupGraph) -> list[Edit]:
    """Replace the store by the stored leaf (or nothing) and add a property after ``__init__``."""
    init, stmt, attr = found.store.method, found.store.stmt, found.attr
    self_name = init.self_name
    if not ctx.is_own_line(stmt) or not ctx.is_own_line(init.node) or attr in class_methods(ctx, found.cls):
        return []
    parameters = [n for n in walk(stmt.value) if isinstance(n, ast.Call) and qualified(ctx, n.func) in PARAMETER]
    raw = f"raw_{attr}"
    if len(parameters) > 1 or parameters and (found.cls.name not in module_classes(ctx) or _mentioned(ctx, raw)):
        return []
    inner = {id(n) for p in parameters for n in walk(p)}
    allowed = {self_name} | imported_names(ctx)
    if any(isinstance(n, ast.Name) and id(n) not in inner and n.id not in allowed for n in walk(stmt.value)):
        return []
    if any(isinstance(n, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)) for n in walk(stmt.value)):
        return []
    value = ctx.text(stmt.value)
    if parameters:
        start, _ = ctx.span(stmt.value)
        p_start, p_end = ctx.span(parameters[0])
        value = value[: p_start - start] + f"{self_name}.{raw}" + value[p_end - start:]
    indent = ctx.indent_of(init.node.lineno)
    nl = ctx.newline
    prop = f"{nl}{indent}{attr} = property(lambda {self_name}: {value}){nl}"
    stored = ""
    if parameters:
        stored = f"{ctx.indent_of(stmt.lineno)}{self_name}.{raw} = {ctx.text(parameters[0])}{nl}"
    end_of_init = ctx.line_end(init.node.end_lineno)
    return [Edit(ctx.line_start(stmt.lineno), ctx.line_end(stmt.end_lineno), stored), Edit(end_of_init, end_of_init, prop)]


def _mentioned(ctx: FileContext, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", ctx.source) is not None
