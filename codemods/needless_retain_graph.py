"""## What it does
Finds `retain_graph=True` on a backward call (`loss.backward(...)`, `torch.autograd.backward`,
`torch.autograd.grad`, `accelerator.backward(loss, ...)`, `self.manual_backward(loss, ...)`)
after which nothing can backpropagate through that graph again: it is the last backward of its
graph, or it sits in a loop that builds a new graph every iteration. In a model class whose
methods hand the graph over through `self` (`forward()` stores `self.fake_B`, `backward_G()`
backpropagates a loss built from it), the fields holding the graph are followed across the
class: the retaining method must be called once per call of the method that first stores those
fields anew, and every other read of them must be detached (`self.fake_B.detach()`), a number
(`model.loss_G.item()`) or printed.

## Why is this bad?
`retain_graph=True` keeps every tensor the backward pass saved (activations, inputs of every
multiplication) alive until the graph's tensors die, instead of freeing them as the backward pass
walks the graph. When no later backward needs them, that is memory held for nothing, often the
size of the whole forward pass. It is frequently copied from an answer to "Trying to backward
through the graph a second time", where only the *earlier* backward calls need it.

## Example
```python
for inputs, targets in loader:
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward(retain_graph=True)
    optimizer.step()
```

## Use instead
```python
    loss.backward()
```
The rule stays silent when a later `backward`/`autograd.grad` may walk any part of the same graph
(two losses on a shared trunk, a sub-graph built before the loop), with `create_graph`, when the
value is not `True` on every path (a constant, or a flag of a configuration object: a dataclass
field's default or a class attribute, with what every construction the program makes passes for
it; unknown when any is not a constant or the field is stored from outside), when the graph
comes from a parameter or attribute (the caller may backpropagate again, unless the function
backpropagates only that parameter and every call the program makes gives it a graph nothing
walks again after the call; a parameter counts as data when it is named like a batch, an input or
a transition (`batch`, `x`, `states`, `obs`, `rewards`, `dones`) or when every call of the
function in this file passes a value without a graph, unless a call of this file passes it a
graph; `self.gamma` counts as a number when the class only ever assigns it numbers) or leaves the
function (returned, unless every caller in this file drops the result or only reads numbers from
it: `loss.item()`, `print(loss)`; stored on an object, passed to an
unknown function after the call), and when a graph carried across loop iterations is the reason
for the keyword (GF101 `graph-carried-across-iterations` reports that cause).

## Fix safety
Safe: the keyword is removed only where no later backward can reach the graph, so every gradient
and parameter is unchanged; the saved tensors are just freed during the backward pass.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.caller_walks import walked_again_through_callers
from fixer.analysis.calls import BackwardCall, backward_calls
from fixer.analysis.field_constants import constant_values
from fixer.analysis.field_walks import walked_through_fields
from fixer.analysis.scopes import Scope, scopes
from fixer.context import FileContext
from fixer.edits.keywords import remove_keyword_keeping_layout
from fixer.rule import Diagnostic, Rule

# positional arguments a call may have before retain_graph/create_graph could be among them
MAX_POSITIONAL = {"method": 1, "scaler": 1, "owner": 1, "autograd.backward": 2, "autograd.grad": 3}


class NeedlessRetainGraph(Rule):
    code = "GF302"
    name = "needless-retain-graph"
    summary = "retain_graph=True on the last backward through a graph only keeps its saved tensors alive"
    fix_safety = "safe"
    cleans_up = True  # a recompute by another rule's fix can leave an earlier retain_graph=True needless

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        if "retain_graph" not in ctx.source:
            return
        for scope in scopes(ctx):
            for call in backward_calls(ctx, scope):
                keyword = _always_true_retain(ctx, scope, call)
                if keyword is None or walked_again_through_callers(ctx, scope, call) is not None and walked_through_fields(ctx, scope, call) is not None:
                    continue  # (a method whose graph the object's fields hold: followed across the class)
                yield self.diagnostic(
                    ctx,
                    keyword,
                    f"{_flag_text(keyword)} keeps the graph's saved tensors alive, but nothing backpropagates "
                    "through this graph again; remove it",
                    remove_keyword_keeping_layout(ctx, call.node, keyword),
                    title="Remove `retain_graph=True`",
                )


def _always_true_retain(ctx: FileContext, scope: Scope, call: BackwardCall) -> Optional[ast.keyword]:
    """The call's ``retain_graph`` keyword when it is True on every path: the constant, or a flag
    of a configuration object that every construction the program makes leaves True."""
    keyword = call.keyword("retain_graph")
    if keyword is None or constant_values(ctx, scope, keyword.value) != frozenset({True}):
        return None
    if any(k.arg is None for k in call.node.keywords) or any(isinstance(a, ast.Starred) for a in call.node.args):
        return None  # **kwargs / *args may hold create_graph
    if len(call.node.args) > MAX_POSITIONAL.get(call.kind, 1):
        return None
    return keyword


def _flag_text(keyword: ast.keyword) -> str:
    if isinstance(keyword.value, ast.Constant):
        return "`retain_graph=True`"
    return f"`retain_graph={ast.unparse(keyword.value)}` (True on every path the program takes)"
