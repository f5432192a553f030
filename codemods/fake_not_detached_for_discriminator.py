"""## What it does
Finds GAN training steps whose discriminator loss is computed on the generator's output without
`.detach()` (`D(fake)`), backpropagated and stepped, while the generator step that follows
backpropagates through the same `fake` (a second call `D(fake)`).

The pattern is recognised by its structure, not by names: one tensor `fake` computed with a graph,
the same callable applied to it twice, the first result reaching a backward call followed by one
optimizer's step, the second result reaching a later backward call followed by another
optimizer's step; the first optimizer is built from that callable's parameters (or, when that is
not visible, the first step also applies the callable to something else, the real batch).

The discriminator steps may run in a loop of their own (`for _ in range(n_critic):`) on a fake
built before it, with the generator step after that loop (GF102 leaves that loop to this rule:
recomputing the fake in it would not help the generator step). Also the reverse order: the
generator step backpropagates through `D(fake)` first and steps,
then the discriminator step applies `D` to the same `fake` undetached (common when the
generator is updated several times per discriminator step).

The steps may be written in helper functions or methods of the same file
(`train_discriminator(real, fake)`, `self.backward_D()` reading `self.fake_B`): a helper's
backward is matched to the caller through its parameters and `self` attributes, and the fake is
the caller's one graph-carrying value (or a `self` attribute every method assigns from a module
call).

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
zeroed in between. Unsafe when the `.detach()` goes into a helper: every other caller of the
helper gets it too (its discriminator gradients are unchanged; a generator that was not zeroed
after it no longer receives the discriminator loss's gradients).
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.calls import BackwardCall, OptimizerCall, backward_calls
from fixer.analysis.gan_steps import FREEING_KINDS, Event, MappedUse, Use, backward_events, may_step_in_helpers
from fixer.analysis.gan_steps import after as _after
from fixer.analysis.gan_steps import before as _before
from fixer.analysis.gan_steps import before_or_at as _before_or_at
from fixer.analysis.gan_steps import between as _between
from fixer.analysis.gan_steps import callable_uses as _uses
from fixer.analysis.gan_steps import flows_to as _flows
from fixer.analysis.gan_steps import optimizer_steps as _steps
from fixer.analysis.graph import GraphFacts, Kind, facts
from fixer.analysis.graph_reuse import derived_names, innermost_loop, names_in, reaches, remove_keyword
from fixer.analysis.names import dotted
from fixer.analysis.protocol import optimizer_params
from fixer.analysis.scopes import Scope, scope_nodes, scopes, under_no_grad
from fixer.analysis.shared_graph import reaching, runs_after_in_same_pass
from fixer.context import FileContext
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class FakeNotDetachedForDiscriminator(Rule):
    code = "GF103"
    name = "fake-not-detached-for-discriminator"
    summary = "The discriminator loss backpropagates into the generator's graph that the generator step needs"
    fix_safety = "mixed"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        reported: set[int] = set()
        helpers = may_step_in_helpers(ctx)
        for scope in scopes(ctx):
            for use in _helper_discriminator_uses(ctx, scope) if helpers else ():
                if id(use.arg) not in reported:
                    reported.add(id(use.arg))
                    yield self._report_in_helper(ctx, use)
            calls = [c for c in backward_calls(ctx, scope) if c.kind in FREEING_KINDS]
            if len(calls) < 2:
                continue
            steps = _steps(ctx, scope)
            if len(steps) < 2:
                continue
            for first, second in _pairs(ctx, scope, calls):
                for use in _discriminator_uses(ctx, scope, first, second, steps):
                    if id(use.arg) not in reported:
                        reported.add(id(use.arg))
                        yield self._report(ctx, scope, use, first, calls)
            for use, second in _discriminator_steps_after_generator(ctx, scope, calls, steps):
                if id(use.arg) not in reported:
                    reported.add(id(use.arg))
                    yield self._report(ctx, scope, use, second, calls)

    def _report_in_helper(self, ctx: FileContext, use: Use) -> Diagnostic:
        text = ctx.text(use.arg)
        start, end = ctx.span(use.arg)
        return self.diagnostic(
            ctx,
            use.arg,
            f"The discriminator step backpropagates through `{text}` into the generator's graph, which the "
            f"generator step needs again; use `{text}.detach()` in the discriminator step",
            [Edit(start, end, f"{text}.detach()")],
            Applicability.UNSAFE,
            title=f"Detach `{text}` for the discriminator",
        )

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


def _helper_discriminator_uses(ctx: FileContext, scope: Scope) -> Iterator[Use]:
    """Discriminator uses where a step runs in a helper: ``train_discriminator(real, fake)`` or
    ``self.backward_D()`` followed by a generator step (a helper or inline) through the same fake."""
    events = backward_events(ctx, scope)
    if len(events) < 2:
        return
    graph, steps = facts(ctx, scope), _steps(ctx, scope)
    for index, first in enumerate(events):
        loop = innermost_loop(ctx, first.stmt, scope.node)
        for second in events[index + 1 :]:
            if (first.helper is None and second.helper is None) or first.stmt is second.stmt:
                continue
            if innermost_loop(ctx, second.stmt, scope.node) is not loop or not runs_after_in_same_pass(ctx, scope, first.stmt, second.stmt):
                continue
            step_d = first.step or next((s.owner for s in steps if _between(s.node, first.stmt, second.stmt)), None)
            step_g = second.step or next(
                (s.owner for s in steps if _after(s.node, second.stmt) and innermost_loop(ctx, s.node, scope.node) is loop), None
            )
            if step_d is None or step_g is None or step_d == step_g:
                continue
            for d in first.uses:
                for g in second.uses:
                    if g.callee != d.callee or g.use is d.use:
                        continue
                    for key in sorted(d.keys & g.keys):
                        producer = _caller_fake(ctx, scope, graph, key, first.stmt, second.stmt, d.callee, (first.helper, second.helper))
                        if producer is not None and _is_discriminator_owner(ctx, d, first, step_d, producer):
                            yield d.use
                            break


def _discriminator_steps_after_generator(
    ctx: FileContext, scope: Scope, calls: list[BackwardCall], steps: list[OptimizerCall]
) -> Iterator[tuple[Use, BackwardCall]]:
    """The generator step runs first (``g_loss.backward()`` through ``D(fake)``, its optimizer
    steps), then the discriminator step applies the callable to the same ``fake`` again: its
    backward walks into the generator graph the first one freed."""
    graph = facts(ctx, scope)
    uses = _uses(ctx, scope, graph)
    for index, first in enumerate(calls):
        if first.keyword("create_graph") is not None or first.keyword("retain_graph") is not None:
            continue
        one = ctx.statement_of(first.node)
        for second in calls[index + 1 :]:
            two = ctx.statement_of(second.node)
            loop = innermost_loop(ctx, two, scope.node)
            if not runs_after_in_same_pass(ctx, scope, one, two, allow_first_loop=True):
                continue
            if loop is not None and not any(parent is loop for parent in ctx.ancestors(one)):
                continue
            step_g = next((s for s in steps if _between(s.node, one, two)), None)
            step_d = next((s for s in steps if _after(s.node, two) and innermost_loop(ctx, s.node, scope.node) is loop), None)
            if step_g is None or step_d is None or step_g.owner == step_d.owner:
                continue
            for use in uses:
                if not _between(use.stmt, one, two, inclusive_end=True) or not _flows(ctx, graph, scope, use.stmt, second):
                    continue
                earlier = [u for u in uses if u.callee == use.callee and u.key == use.key and _before_or_at(u.stmt, one)
                           and _flows(ctx, graph, scope, u.stmt, first)]
                producer = _fake_definition(ctx, graph, scope, use)
                if producer is None or not earlier or any(_fake_definition(ctx, graph, scope, u) is not producer for u in earlier):
                    continue
                generator_owners = optimizer_params(ctx).get(step_g.owner)
                if generator_owners and any(_related(use.callee, o) for o in generator_owners):
                    continue
                if _is_discriminator_step(ctx, scope, use, producer, step_d, two):
                    yield use, second
                    break


def _caller_fake(
    ctx: FileContext, scope: Scope, graph: GraphFacts, key: str, first: ast.stmt, second: ast.stmt, callee: str,
    helpers: tuple[Optional[Scope], ...] = (),
) -> Optional[ast.expr]:
    """The graph-carrying value ``key`` holds at both steps: one assignment of the caller reaching
    both, or, for ``self.fake`` the caller never assigns, every assignment of it in the class."""
    if "[" in key:
        return None
    if graph.assignments.get(key):
        defs = reaching(graph, key, first)
        if len(defs) != 1 or [id(s) for s, _ in reaching(graph, key, second)] != [id(defs[0][0])]:
            return None
        stmt, value = defs[0]
        return value if _generated(ctx, graph, stmt, value, callee) else None
    if scope.self_name is None or not key.startswith(scope.self_name + "."):
        return None
    values, assigning = [], set()
    for method in scopes(ctx):
        if method.class_node is not scope.class_node or method.self_name is None or isinstance(method.node, ast.Module):
            continue
        own = method.self_name + key[len(scope.self_name) :]
        method_graph = facts(ctx, method)
        for stmt, value in method_graph.assignments.get(own, []):
            if not hasattr(stmt, "lineno") or not _generated(ctx, method_graph, stmt, value, callee, method_graph):
                return None
            values.append(value)
            assigning.add(method.node.name)
    # regenerated between the steps (`self.forward()` again) or inside a step's helper
    calls = [(n, scope) for n in scope_nodes(scope) if isinstance(n, ast.Call) and _between(n, first, second)]
    calls += [(n, h) for h in helpers if h is not None for n in scope_nodes(h) if isinstance(n, ast.Call)]
    for node, owner in calls:
        if isinstance(node.func, ast.Attribute) and node.func.attr in assigning and dotted(node.func.value) == owner.self_name:
            return None
    return values[0] if values else None


def _generated(ctx: FileContext, graph: GraphFacts, stmt: ast.AST, value: Optional[ast.expr], callee: str, modules: Optional[GraphFacts] = None) -> bool:
    """A graph-carrying value computed by a call of something other than the discriminator (with
    ``modules``: by a module call)."""
    if value is None or under_no_grad(ctx, stmt) or graph.kind(value, stmt) < Kind.UNKNOWN:
        return False
    calls = [n for n in ast.walk(value) if isinstance(n, ast.Call)]
    if not calls or callee.rpartition(".")[2] in {n.rpartition(".")[2] for n in names_in(value)}:
        return False
    return modules is None or any(modules.is_module(c.func) for c in calls)


def _is_discriminator_owner(ctx: FileContext, d: MappedUse, event: Event, step: str, producer: ast.expr) -> bool:
    owners = optimizer_params(ctx).get(step)
    producer_calls = {n.rpartition(".")[2] for c in ast.walk(producer) if isinstance(c, ast.Call) and (n := dotted(c.func))}
    if owners:
        return any(_related(d.callee, o) for o in owners) and not any(o.rpartition(".")[2] in producer_calls for o in owners)
    return any(u.callee == d.callee and not (u.keys & d.keys) for u in event.uses)


def _pairs(ctx: FileContext, scope: Scope, calls: list[BackwardCall]) -> Iterator[tuple[BackwardCall, BackwardCall]]:
    """(discriminator backward, generator backward) candidates: the second runs after the first in
    the same pass, in the same loop, or after the loop of discriminator steps around the first."""
    for index, first in enumerate(calls):
        if first.keyword("create_graph") is not None:
            continue
        for second in calls[index + 1 :]:
            one, two = ctx.statement_of(first.node), ctx.statement_of(second.node)
            loop = innermost_loop(ctx, two, scope.node)
            if innermost_loop(ctx, one, scope.node) is loop and runs_after_in_same_pass(ctx, scope, one, two):
                yield first, second
            elif (loop is None or any(p is loop for p in ctx.ancestors(one))) and runs_after_in_same_pass(ctx, scope, one, two, allow_first_loop=True):
                yield first, second  # discriminator steps in a loop of their own (n_critic), then the generator step


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

