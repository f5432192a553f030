"""## What it does
Finds an `nn.Module` whose `forward` stores a graph-carrying tensor on `self` (`self.prev = out`,
`self.running = self.running * m + h.mean(0)` on a plain attribute or a buffer, with gradient
recording on) and reads it again in the next call. A value computed with torch operations from an
argument counts as graph-carrying when every call of the method in the file passes one
(`self._update_memory(self.k(x), v)`, `lif(fc(x))`); an argument used only for its shape, dtype or
device (`cache.type_as(x)`) does not. The store may be in a helper method `forward` calls after
reading the attribute (`self.remember(hidden)`: `fixer/analysis/helper_stores.py`).

One training step is one call of the top-level `forward`: a state that another method of the
class stores fresh, graph-free values into (`forward` calling `init_state()` before unrolling a
`step` method, `if t == 0: self.init_attention()`) is reset at each sequence start and is not
reported, unless that store is guarded by a test of the attribute itself (`if self.h is None:`,
a lazy initialisation that runs once; also a test of another attribute the same `if` initialises). A reset method the training code calls only outside the
loop around its backward calls (`model.memory.reset()` once per document, `loss.backward()` once
per segment) resets nothing between two backwards, and the state is reported. The same holds for
a reset through a flag: `forward` refilling the state under `if self.should_reset:` before any
read, the flag raised by a method that runs at each step (`reset_state()` called by the owning
model's `forward`) or only outside the backward loop (reported).

## Why is this bad?
The stored tensor keeps the autograd graph of the call that made it. When the next call feeds it
into its output, that call's `backward()` walks into the previous call's graph, which the
previous backward freed: `RuntimeError: Trying to backward through the graph a second time`.
When it only feeds its own update (a running statistic), no gradient ever flows through it, but
every call's graph is chained onto the next and never freed: memory grows with every step.

## Example
```python
class Smoother(nn.Module):
    def forward(self, x):
        out = self.fc(x)
        if self.prev is not None:
            out = 0.5 * (out + self.prev)
        self.prev = out
        return out
```

## Use instead
```python
        self.prev = out.detach()
```
The rule always detaches the stored value (rather than wrapping the update in
`torch.no_grad()`): one spelling for caches and statistics, and the value stays a tensor of the
same shape and dtype. Every graph store of the attribute in the method is detached (both
branches of `if self.m is None: self.m = d` / `else: self.m = self.m + d`), and of a tuple store
`self.m, self.z = a, b` only the element stored into the attribute reported. When the call itself uses the attribute again after storing it
(`self.state = 0.8 * self.state + f(x); return self.state`), the previous call's value is detached
where it is read instead (`0.8 * self.state.detach()`), so this call keeps its own gradient. A state unpacked from a call
(`out, self.hidden = self.lstm(x, self.hidden)`) is detached by a new statement after it
(`self.hidden = tuple(h.detach() for h in self.hidden)` for an LSTM's `(h, c)`), only when it is
known to be a tensor or a tuple of tensors.

## Fix safety
Safe for a running statistic that only feeds its own update and that no other method reads: no
gradient ever flowed through it, so gradients and parameters are unchanged (only the chain of old
graphs is freed). Unsafe for a cache that feeds the output: gradient no longer flows from one
call into the previous call's computation. With one backward per call the original raises at the
second backward, so nothing it computed changes; a model that calls the module several times
before one backward (unrolling a sequence) loses the gradient between those calls.
"""

from __future__ import annotations

import ast
import re
from typing import Iterator

from fixer.analysis.carried_shape import class_init_values, shape_of
from fixer.analysis.graph import Kind, facts
from fixer.analysis.helper_stores import helper_cached_states, sequence_loop
from fixer.analysis.module_cache import CachedState, cached_states, may_cache_on_module, stores_graph
from fixer.context import FileContext
from fixer.edits.values import detached_text
from fixer.rule import Applicability, Diagnostic, Edit, Rule

ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)


class GraphCachedOnModule(Rule):
    code = "GF104"
    name = "graph-cached-on-module"
    summary = "A module keeps a graph-carrying tensor on self and reuses it in the next forward call"
    fix_safety = "mixed"
    prefilter = re.compile(rb"def forward\b")

    @classmethod
    def applies_to(cls, data: bytes) -> bool:
        return may_cache_on_module(data)

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for state in cached_states(ctx) + helper_cached_states(ctx):
            yield self._report(ctx, state)

    def _report(self, ctx: FileContext, state: CachedState) -> Diagnostic:
        self_name = state.method.self_name
        target = f"{self_name}.{state.attr}"
        edits = _read_edits(ctx, state) if state.read_after_store else _detach_edits(ctx, state)
        safe = state.statistic and not state.read_elsewhere
        if state.statistic:
            why = "chains every call's autograd graph onto the next, so none is ever freed"
        else:
            why = "feeds the next call's output, whose backward walks the graph this call's backward freed"
        remedy = "read the previous value detached" if state.read_after_store else "store a detached value"
        sequence = sequence_loop(ctx) if not state.statistic else None
        if sequence is not None:  # several forward passes per backward: the state carries their gradient
            edits, remedy = [], (
                f"reset it at the start of each sequence (the loop at line {sequence.lineno} runs several forward passes "
                "before one backward; a detached value would cut the gradient between them)"
            )
        message = f"`{target}` keeps this call's autograd graph and {why}; {remedy}"
        applicability = Applicability.SAFE if safe else Applicability.UNSAFE
        return self.diagnostic(ctx, state.store, message, edits, applicability, title=f"Store `{target}` detached")


def _detach_edits(ctx: FileContext, state: CachedState) -> list[Edit]:
    """Each graph store of the attribute stores its value detached (``self.m, self.n = a, b``
    detaches only the element stored into this attribute)."""
    graph = facts(ctx, state.method)
    edits = []
    for stmt, value in state.stores or ((state.store, state.store.value),):
        target = stmt.targets[0]
        if isinstance(target, (ast.Tuple, ast.List)) and not isinstance(stmt.value, (ast.Tuple, ast.List)):
            edits += _detach_after_unpacking(ctx, state) if stmt is state.store else []
            continue
        parts = value.elts if isinstance(value, ast.Tuple) else [value]
        for part in parts:
            if graph.kind(part, stmt) != Kind.GRAPH and not stores_graph(ctx, state.method, state.methods, part, stmt):
                continue
            text = ctx.text(part)
            start, end = ctx.span(part)
            edits.append(Edit(start, end, f"{text}.detach()" if isinstance(part, ATOMS) else f"({text}).detach()"))
    return edits


def _read_edits(ctx: FileContext, state: CachedState) -> list[Edit]:
    """The attribute is used again after the store in the same call, so the stored value must keep
    its graph for this call: detach the previous call's value where it is read instead."""
    shape = _shape(ctx, state)
    edits = []
    for read in state.previous_reads:
        start, end = ctx.span(read)
        edits.append(Edit(start, end, detached_text(ctx.text(read), shape) or f"{ctx.text(read)}.detach()"))
    return edits


def _detach_after_unpacking(ctx: FileContext, state: CachedState) -> list[Edit]:
    """``out, self.hidden = self.lstm(x, self.hidden)``: the stored element is not a separate
    expression, so the detached value is stored by a new statement right after this one (a tensor
    or, for an LSTM's ``(h, c)``, a tuple of tensors; nothing when the shape is unknown)."""
    shape = _shape(ctx, state)
    stmt = state.store
    if shape == "unknown" or not ctx.is_own_line(stmt):
        return []
    name = f"{state.method.self_name}.{state.attr}"
    at = ctx.line_end(stmt.end_lineno)
    before = ctx.newline if not ctx.source[:at].endswith(("\n", "\r")) else ""
    return [Edit(at, at, f"{before}{ctx.indent_of(stmt.lineno)}{name} = {detached_text(name, shape)}{ctx.newline}")]


def _shape(ctx: FileContext, state: CachedState) -> str:
    graph = facts(ctx, state.method)
    name = f"{state.method.self_name}.{state.attr}"
    values = [v for s, v in graph.assignments.get(name, []) if v is not None and s is state.store]
    return shape_of(ctx, graph, values, class_init_values(ctx, state.method, "__init__").get(name))
