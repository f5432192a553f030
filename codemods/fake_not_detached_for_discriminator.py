"""## What it does
Finds GAN training steps whose discriminator loss is computed on the generator's output without
`.detach()` (`D(fake)`), backpropagated and stepped, while the generator step that follows
backpropagates through the same `fake` (a second call `D(fake)`).

The pattern is recognised by its structure, not by names: one tensor `fake` computed with a graph,
the same callable applied to it twice, the first result reaching a backward call followed by one
optimizer's step, the second result reaching a later backward call followed by another
optimizer's step; the first optimizer is built from that callable's parameters (or, when that is
not visible, the first step also applies the callable to something else, the real batch).

## Why is this bad?
The discriminator's backward walks on into the generator's graph and frees it, so the generator
step raises "Trying to backward through the graph a second time". With the usual band-aid,
`d_loss.backward(retain_graph=True)`, it runs, but the generator also receives the gradients of
the discriminator loss (which pushes the generator the wrong way) unless its gradients are zeroed
in between, and the whole generator graph is kept alive for nothing.

## Example
```python
fake = G(z)
d_loss = bce(D(real), ones) + bce(D(fake), zeros)
opt_d.zero_grad(); d_loss.backward(); opt_d.step()
g_loss = bce(D(fake), ones)
opt_g.zero_grad(); g_loss.backward(); opt_g.step()
```

## Use instead
```python
d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)
```
Only the discriminator's use of `fake` is detached; the generator step keeps `D(fake)`. A
`retain_graph=True` on the discriminator's backward is removed with it when nothing later
backpropagates through that loss.

## Fix safety
Safe when the discriminator's backward had no `retain_graph`: the program raised before; now the
discriminator gradients are those of the same loss and the generator's come from its own loss
only (the canonical DCGAN step). Unsafe when it had `retain_graph=True`: the discriminator's
gradients are unchanged, but the generator no longer accumulates the discriminator loss's
gradients, so its gradients and parameters change (to the canonical ones) when they were not
zeroed in between.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterator, Optional

from fixer.analysis.calls import BackwardCall, OptimizerCall, backward_calls, optimizer_calls
from fixer.analysis.graph import DETACHING_METHODS, GraphFacts, Kind, facts
from fixer.analysis.graph_reuse import derived_names, flows_straight, innermost_loop, names_in, reaches, remove_keyword
from fixer.analysis.names import dotted, qualified
from fixer.analysis.protocol import optimizer_params
from fixer.analysis.scopes import Scope, scope_nodes, scopes, under_no_grad
from fixer.analysis.shared_graph import runs_after_in_same_pass
from fixer.context import FileContext
from fixer.rule import Applicability, Diagnostic, Edit, Rule

FREEING_KINDS = ("method", "owner", "scaler", "autograd.backward")


@dataclass(frozen=True)
class Use:
    """``callable(..., fake, ...)``: one application of a callable to the fake tensor."""

    call: ast.Call
    arg: ast.expr
    callee: str
    key: str
    stmt: ast.stmt


class FakeNotDetachedForDiscriminator(Rule):
    code = "GF103"
    name = "fake-not-detached-for-discriminator"
    summary = "The discriminator loss backpropagates into the generator's graph that the generator step needs"
    fix_safety = "mixed"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in scopes(ctx):
            calls = [c for c in backward_calls(ctx, scope) if c.kind in FREEING_KINDS]
            if len(calls) < 2:
                continue
            steps = _steps(ctx, scope)
            if len(steps) < 2:
                continue
            reported: set[int] = set()
            for first, second in _pairs(ctx, scope, calls):
                for use in _discriminator_uses(ctx, scope, first, second, steps):
                    if id(use.arg) not in reported:
                        reported.add(id(use.arg))
                        yield self._report(ctx, scope, use, first, calls)

    def _report(self, ctx: FileContext, scope: Scope, use: Use, call: BackwardCall, calls: list[BackwardCall]) -> Diagnostic:
        text = ctx.text(use.arg)
        start, end = ctx.span(use.arg)
        edits = [Edit(start, end, f"{text}.detach()")]
        band_aid = call.flag("retain_graph") is True
        if band_aid and not _backpropagated_again(ctx, scope, call, calls):
            edits.append(remove_keyword(ctx, call.node, "retain_graph"))
        return self.diagnostic(
            ctx,
            use.arg,
            f"The discriminator loss backpropagates through `{text}` into the generator's graph, which the "
            f"generator step needs again; use `{text}.detach()` in the discriminator step",
            edits,
            Applicability.UNSAFE if band_aid else Applicability.SAFE,
            title=f"Detach `{text}` for the discriminator",
        )


def _steps(ctx: FileContext, scope: Scope) -> list[OptimizerCall]:
    """Optimizer steps, including names the name heuristic misses (``optD``) but the file builds
    from ``torch.optim``."""
    found = [o for o in optimizer_calls(ctx, scope) if o.kind == "step"]
    known = {id(o.node) for o in found}
    built = optimizer_params(ctx)
    for node in scope_nodes(scope):
        if isinstance(node, ast.Call) and id(node) not in known and isinstance(node.func, ast.Attribute) and node.func.attr == "step":
            owner = dotted(node.func.value)
            if owner in built:
                found.append(OptimizerCall(node, "step", owner))
    return sorted(found, key=lambda o: _position(o.node))


def _pairs(ctx: FileContext, scope: Scope, calls: list[BackwardCall]) -> Iterator[tuple[BackwardCall, BackwardCall]]:
    """(discriminator backward, generator backward) candidates: the second runs after the first in
    the same pass, in the same loop."""
    for index, first in enumerate(calls):
        if first.keyword("create_graph") is not None:
            continue
        for second in calls[index + 1 :]:
            one, two = ctx.statement_of(first.node), ctx.statement_of(second.node)
            if innermost_loop(ctx, one, scope.node) is innermost_loop(ctx, two, scope.node) and runs_after_in_same_pass(ctx, scope, one, two):
                yield first, second


def _discriminator_uses(
    ctx: FileContext, scope: Scope, first: BackwardCall, second: BackwardCall, steps: list[OptimizerCall]
) -> Iterator[Use]:
    graph = facts(ctx, scope)
    one_stmt, two_stmt = ctx.statement_of(first.node), ctx.statement_of(second.node)
    step_d = next((s for s in steps if _between(s.node, one_stmt, two_stmt)), None)
    step_g = next((s for s in steps if _after(s.node, two_stmt) and innermost_loop(ctx, s.node, scope.node) is innermost_loop(ctx, two_stmt, scope.node)), None)
    if step_d is None or step_g is None or step_d.owner == step_g.owner:
        return
    uses = _uses(ctx, scope, graph)
    for use in uses:
        if not _before_or_at(use.stmt, one_stmt) or not _flows(ctx, graph, scope, use.stmt, first):
            continue
        later = [u for u in uses if u.callee == use.callee and u.key == use.key and _between(u.stmt, one_stmt, two_stmt, inclusive_end=True)]
        if not any(_flows(ctx, graph, scope, u.stmt, second) for u in later) or _flows(ctx, graph, scope, use.stmt, second):
            continue
        producer = _fake_definition(ctx, graph, scope, use)
        if producer is None or any(_fake_definition(ctx, graph, scope, u) is not producer for u in later):
            continue  # no graph-carrying fake, or it is regenerated for the generator step
        if _is_discriminator_step(ctx, scope, use, producer, step_d, one_stmt):
            yield use


def _uses(ctx: FileContext, scope: Scope, graph: GraphFacts) -> list[Use]:
    """Applications of a callable (not a torch function, not a tensor method) to a named tensor."""

    def compute() -> list[Use]:
        found = []
        for node in scope_nodes(scope):
            if not isinstance(node, ast.Call) or under_no_grad(ctx, node):
                continue
            callee = dotted(node.func)
            if callee is None or (qualified(ctx, node.func) or "").startswith("torch.") or _is_tensor_method(graph, node):
                continue
            for arg in node.args:
                key = _key(arg)
                if key is not None:
                    found.append(Use(node, arg, callee, key, ctx.statement_of(node)))
        return found

    return ctx.memo(("gan_uses", id(scope.node)), compute)


def _is_tensor_method(graph: GraphFacts, call: ast.Call) -> bool:
    func = call.func
    return isinstance(func, ast.Attribute) and (func.attr in DETACHING_METHODS or graph.kind(func.value, call) >= Kind.LEAF)


def _key(node: ast.expr) -> Optional[str]:
    """``fake``, ``self.fake``, ``out["fake"]``."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        return dotted(node)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, (str, int)):
        base = dotted(node.value)
        return f"{base}[{node.slice.value!r}]" if base else None
    return None


def _fake_definition(ctx: FileContext, graph: GraphFacts, scope: Scope, use: Use) -> Optional[ast.AST]:
    """The one assignment of the fake tensor reaching ``use``, if its value carries a graph from a
    call of something other than the discriminator."""
    if isinstance(use.arg, ast.Subscript):
        found = _item_definition(ctx, scope, use)
    else:
        defs = graph.reaching(use.key, use.stmt) if all(hasattr(s, "lineno") for s, _ in graph.assignments.get(use.key, [])) else []
        found = defs[0] if len(defs) == 1 and _before(defs[0][0], use.stmt) else None
    if found is None:
        return None
    stmt, value = found
    if value is None or under_no_grad(ctx, stmt) or graph.kind(value, stmt) < Kind.UNKNOWN:
        return None
    if not any(isinstance(n, ast.Call) for n in ast.walk(value)) or use.callee in names_in(value):
        return None
    return stmt


def _item_definition(ctx: FileContext, scope: Scope, use: Use) -> Optional[tuple[ast.AST, ast.expr]]:
    """The latest ``base[key] = value`` or ``base = {key: value}`` before ``use``."""
    base, key = dotted(use.arg.value), use.arg.slice.value
    latest = None
    for node in scope_nodes(scope):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not _before(node, use.stmt):
            continue
        target = node.targets[0]
        if isinstance(target, ast.Subscript) and dotted(target.value) == base and _key(target) == use.key:
            latest = (node, node.value)
        elif dotted(target) == base:
            value = node.value
            items = dict(zip((k.value if isinstance(k, ast.Constant) else None for k in value.keys), value.values)) if isinstance(value, ast.Dict) else {}
            latest = (node, items[key]) if key in items else None
    return latest


def _flows(ctx: FileContext, graph: GraphFacts, scope: Scope, stmt: ast.stmt, call: BackwardCall) -> bool:
    """The value computed by ``stmt`` reaches the tensor ``call`` backpropagates."""
    if stmt is ctx.statement_of(call.node):
        return True
    if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return False
    region = [n for n in scope_nodes(scope) if hasattr(n, "lineno") and _between(n, stmt, call.node, inclusive_end=True)]
    return flows_straight(ctx, graph, stmt, region, call)


def _is_discriminator_step(ctx: FileContext, scope: Scope, use: Use, producer: ast.AST, step: OptimizerCall, first_stmt: ast.stmt) -> bool:
    """The optimizer stepped after the first backward owns the callable's parameters and not the
    producer's; when its parameters are unknown, the first step also applies the callable to
    another input (the real batch)."""
    owners = optimizer_params(ctx).get(step.owner)
    producer_calls = {dotted(n.func) for n in ast.walk(producer) if isinstance(n, ast.Call)} - {None}
    if owners:
        return any(_related(use.callee, o) for o in owners) and not any(_related(p, o) for p in producer_calls for o in owners)
    loop = innermost_loop(ctx, first_stmt, scope.node)
    return any(
        u.callee == use.callee and u.key != use.key and _before_or_at(u.stmt, first_stmt)
        and innermost_loop(ctx, u.stmt, scope.node) is loop
        for u in _uses(ctx, scope, facts(ctx, scope))
    )


def _backpropagated_again(ctx: FileContext, scope: Scope, call: BackwardCall, calls: list[BackwardCall]) -> bool:
    """Some other backward call backpropagates the same loss (or a value computed from it)."""
    graph = facts(ctx, scope)
    derived = derived_names(ctx, graph, names_in(call.target), scope_nodes(scope))
    return any(other is not call and reaches(other, derived) for other in calls)


def _related(a: str, b: str) -> bool:
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _position(node: ast.AST) -> tuple[int, int]:
    return (node.lineno, node.col_offset)


def _before(a: ast.AST, b: ast.AST) -> bool:
    return (a.end_lineno, a.end_col_offset) <= _position(b)


def _after(a: ast.AST, b: ast.AST) -> bool:
    return _position(a) >= (b.end_lineno, b.end_col_offset)


def _before_or_at(a: ast.AST, b: ast.AST) -> bool:
    return _position(a) <= _position(b)


def _between(node: ast.AST, first: ast.AST, last: ast.AST, inclusive_end: bool = False) -> bool:
    position = _position(node)
    return _after(node, first) and (position <= _position(last) if inclusive_end else position < _position(last))
