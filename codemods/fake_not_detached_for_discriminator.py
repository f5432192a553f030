"""## What it does
Finds GAN training steps whose discriminator loss is computed on the generator's output without
`.detach()` (`D(fake)`), backpropagated and stepped, while the generator step that follows
backpropagates through the same `fake` (a second call `D(fake)`).

The pattern is recognised by its structure and by who trains what, not by names: one tensor
`fake` made by a module's forward pass (`G(z)`, `G(z).view(...)`, a name assigned from one), the
same callable applied to it twice, the first result reaching a backward call followed by one
optimizer's step, the second result reaching a later backward call followed by another
optimizer's step. The roles must be visible in the file: the discriminator step's optimizer is
built from the callable's parameters and not the producer's, the generator step's optimizer from
the producer's and not the callable's (a parameter list named first, `params =
itertools.chain(G.parameters(), E.parameters())`, counts as written inline). Data is never a
fake: a batch from a sampler or a loader, `torch.randn(...)`, `x.to(device)`, a helper of another
module. When an optimizer's parameters cannot be seen (`opt_g, opt_d = self.optimizers()`), the
rule stays silent. A use whose result is detached (`D(fake).detach()`, `G(z).detach()`) reaches
no backward.

The discriminator steps may run in a loop of their own (`for _ in range(n_critic):`) on a fake
built before it, with the generator step after that loop (GF102 leaves that loop to this rule:
recomputing the fake in it would not help the generator step). Also the reverse order: the
generator step backpropagates through the fake first and steps, then the discriminator step
applies its module to the same `fake` undetached (common when the generator is updated several
times per discriminator step); every read of `fake` in the discriminator step is detached, since
its optimizer does not train the producer. The same holds for any two steps where the first
step's optimizer trains the module that made a shared tensor (a shared encoder trained with the
critic, reused by the actor step). And the reverse order with a reused output: `out = D(fake)`
computed before the generator step, backpropagated by it, then read again by the discriminator
step: that step gets `D(fake.detach())` of its own (also when the output is kept on a field that
only this method writes, `self.p_fake = self.D(self.fake)`).

The steps may be written in helper functions or methods of the same file
(`train_discriminator(real, fake)`, `self.backward_D()` reading `self.fake_B`): a helper's
backward is matched to the caller through its parameters and `self` attributes, and the fake is
the caller's value made by a module (or a `self` attribute every method assigns from a module
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
after it no longer receives the discriminator loss's gradients). For a reused output, `out` in the
discriminator step becomes `D(fake.detach())`: the same value (the discriminator has not stepped
since `out` was computed), evaluated again, so a discriminator with dropout draws a new mask and
one with batch norm updates its running statistics once more; safe or unsafe as above, by the
generator step's `retain_graph`.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.calls import BackwardCall, OptimizerCall, backward_calls
from fixer.analysis.gan_fakes import caller_fake, fake_definition, same_definition
from fixer.analysis.gan_roles import discriminates, producers, roles_hold, trains
from fixer.analysis.gan_steps import FREEING_KINDS, Use, backward_events, may_step_in_helpers, use_key
from fixer.analysis.gan_steps import after as _after, before as _before
from fixer.analysis.gan_steps import before_or_at as _before_or_at
from fixer.analysis.gan_steps import between as _between
from fixer.analysis.gan_steps import callable_uses as _uses
from fixer.analysis.gan_steps import carried_within
from fixer.analysis.gan_steps import flows_to as _flows
from fixer.analysis.gan_steps import optimizer_steps as _steps
from fixer.analysis.gan_steps import ASSIGNMENTS, discriminator_generator_pairs, statement_flows_to
from fixer.analysis.graph import GraphFacts, facts
from fixer.analysis.graph_reuse import assigned_names, derived_names, flowing_names, innermost_loop, names_in, reaches
from fixer.analysis.class_model import attribute_writes, written_only_in
from fixer.analysis.names import dotted
from fixer.analysis.protocol import optimizer_params
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.analysis.shared_graph import flowing_nodes, runs_after_in_same_pass, same_pass_later
from fixer.context import FileContext
from fixer.edits.keywords import remove_keyword
from fixer.rule import Applicability, Diagnostic, Edit, Rule

MESSAGE = (
    "The discriminator loss backpropagates through `{text}` into the generator's graph, which the "
    "generator step {when}; use `{text}.detach()` in the discriminator step"
)
READING = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)
NEEDS_AGAIN = "needs again"
ALREADY_USED = "already backpropagated and stepped"


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
            if len({s.owner for s in steps}) < 2:  # one optimizer: no generator and discriminator steps
                continue
            for first, second in discriminator_generator_pairs(ctx, scope, calls):
                for use in _discriminator_uses(ctx, scope, first, second, steps):
                    if id(use.arg) not in reported:
                        reported.add(id(use.arg))
                        yield self._report(ctx, scope, [use.arg], first, calls, NEEDS_AGAIN)
            for reads, second in _discriminator_steps_after_generator(ctx, scope, calls, steps):
                if not any(id(r) in reported for r in reads):
                    reported.update(id(r) for r in reads)
                    yield self._report(ctx, scope, reads, second, calls, ALREADY_USED)
            for use, reads, first in _reused_discriminator_outputs(ctx, scope, calls, steps):
                if not any(id(r) in reported for r in reads):
                    reported.update(id(r) for r in reads)
                    yield self._report_reused(ctx, scope, use, reads, first, calls)

    def _report_in_helper(self, ctx: FileContext, use: Use) -> Diagnostic:
        text = ctx.text(use.arg)
        start, end = ctx.span(use.arg)
        return self.diagnostic(
            ctx,
            use.arg,
            MESSAGE.format(text=text, when=NEEDS_AGAIN).replace("discriminator loss", "discriminator step", 1),
            [Edit(start, end, f"{text}.detach()")],
            Applicability.UNSAFE,
            title=f"Detach `{text}` for the discriminator",
        )

    def _report(
        self, ctx: FileContext, scope: Scope, args: list[ast.expr], call: BackwardCall, calls: list[BackwardCall], when: str
    ) -> Diagnostic:
        text = ctx.text(args[0])
        edits = [Edit(*ctx.span(arg), f"{ctx.text(arg)}.detach()") for arg in args]
        band_aid = call.flag("retain_graph") is True
        if band_aid and not _backpropagated_again(ctx, scope, call, calls):
            edits.append(remove_keyword(ctx, call.node, "retain_graph"))
        return self.diagnostic(
            ctx,
            args[0],
            MESSAGE.format(text=text, when=when),
            edits,
            Applicability.UNSAFE if band_aid else Applicability.SAFE,
            title=f"Detach `{text}` for the discriminator",
        )

    def _report_reused(
        self, ctx: FileContext, scope: Scope, use: Use, reads: list[ast.expr], first: BackwardCall, calls: list[BackwardCall]
    ) -> Diagnostic:
        """The discriminator step reads ``out = D(fake)`` that the generator step backpropagated
        (and whose generator it stepped): it gets ``D(fake.detach())`` of its own."""
        call_start, call_end = ctx.span(use.call)
        arg_start, arg_end = ctx.span(use.arg)
        fresh = ctx.source[call_start:arg_start] + f"{ctx.text(use.arg)}.detach()" + ctx.source[arg_end:call_end]
        name = ctx.text(reads[0])
        key = use_key(use.arg)
        edits = [Edit(*ctx.span(read), f"{ctx.text(read)}.detach()" if use_key(read) == key else fresh) for read in reads]
        band_aid = first.flag("retain_graph") is True
        if band_aid and not _backpropagated_again(ctx, scope, first, calls):
            edits.append(remove_keyword(ctx, first.node, "retain_graph"))
        return self.diagnostic(
            ctx,
            reads[0],
            f"The discriminator loss backpropagates through `{name}` = `{ctx.text(use.call)}` into the generator's "
            f"graph, which the generator step {ALREADY_USED}; use `{fresh}` in the "
            "discriminator step",
            edits,
            Applicability.UNSAFE if band_aid else Applicability.SAFE,
            title=f"Use `{fresh}` in the discriminator step",
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
                        made_by = caller_fake(ctx, scope, graph, key, first.stmt, second.stmt, (first.helper, second.helper))
                        if made_by and roles_hold(ctx, d.callee, made_by, step_d, step_g):
                            yield d.use
                            break


def _discriminator_steps_after_generator(
    ctx: FileContext, scope: Scope, calls: list[BackwardCall], steps: list[OptimizerCall]
) -> Iterator[tuple[list[ast.expr], BackwardCall]]:
    """The generator step runs first (``g_loss.backward()`` through ``D(fake)``, its optimizer
    steps), then the discriminator step applies its module to the same ``fake`` again: its
    backward walks into the generator graph the first one freed. Every graph-carrying read of ``fake``
    in the discriminator step is detached there (the generator step's optimizer trains the producer)."""
    graph = facts(ctx, scope)
    uses = _uses(ctx, scope, graph)
    for first, second, one, two, step_g, step_d in _generator_first_pairs(ctx, scope, calls, steps, ("create_graph", "retain_graph")):
        for use in uses:
            if not discriminates(ctx, use.callee, step_d.owner, step_g.owner):
                continue
            if not _between(use.stmt, one, two, inclusive_end=True) or not _flows(ctx, graph, scope, use, second):
                continue
            found = fake_definition(ctx, graph, scope, use)
            if found is None:
                continue
            if not any(u.key == use.key and _before_or_at(u.stmt, one) and _flows(ctx, graph, scope, u, first)
                       and same_definition(ctx, graph, scope, u, found) for u in uses):
                continue  # the generator step does not backpropagate through this fake
            if not roles_hold(ctx, use.callee, producers(ctx, graph, found[1], found[0]), step_d.owner, step_g.owner):
                continue
            if not _rebound(ctx, scope, {use.key.partition("[")[0]}, one, two):
                yield _reads(ctx, scope, use.key, one, two), second
                break


def _generator_first_pairs(
    ctx: FileContext, scope: Scope, calls: list[BackwardCall], steps: list[OptimizerCall], unless: tuple[str, ...]
) -> Iterator[tuple[BackwardCall, BackwardCall, ast.stmt, ast.stmt, OptimizerCall, OptimizerCall]]:
    """(first backward, second backward, their statements, the generator and discriminator steps)
    for every pair run generator step first; a first backward passing one of ``unless`` is skipped."""
    later = same_pass_later(ctx, scope, [ctx.statement_of(c.node) for c in calls], allow_first_loop=True)  # the only ones to ask
    for index, first in ((i, c) for i, c in enumerate(calls) if all(c.keyword(flag) is None for flag in unless)):
        one = ctx.statement_of(first.node)
        for second in (calls[i] for i in later[index]):
            two = ctx.statement_of(second.node)
            pair = _generator_first_steps(ctx, scope, one, two, steps)
            if pair is not None:
                yield (first, second, one, two, *pair)


def _generator_first_steps(
    ctx: FileContext, scope: Scope, one: ast.stmt, two: ast.stmt, steps: list[OptimizerCall]
) -> Optional[tuple[OptimizerCall, OptimizerCall]]:
    """(the step after the first backward, the step after the second) when the second backward
    runs after the first in the same pass (or after a loop of first steps) and two different
    optimizers step."""
    loop = innermost_loop(ctx, two, scope.node)
    if not runs_after_in_same_pass(ctx, scope, one, two, allow_first_loop=True):
        return None
    if loop is not None and not any(parent is loop for parent in ctx.ancestors(one)):
        return None
    step_g = next((s for s in steps if _between(s.node, one, two)), None)
    step_d = next((s for s in steps if _after(s.node, two) and innermost_loop(ctx, s.node, scope.node) is loop), None)
    if step_g is None or step_d is None or step_g.owner == step_d.owner:
        return None
    return step_g, step_d


def _reads(ctx: FileContext, scope: Scope, key: str, start: ast.stmt, two: ast.stmt) -> list[ast.expr]:
    """The graph-carrying reads of ``key`` in the statements after ``start`` up to ``two``: every
    one of them, whichever branch it is in, so that none is left behind."""
    found: list[ast.expr] = []
    for stmt in scope_nodes(scope):
        if isinstance(stmt, READING) and stmt.value is not None and _between(stmt, start, two, inclusive_end=True):
            found += [n for n in flowing_nodes(ctx, stmt.value) if use_key(n) == key and carried_within(ctx, n, stmt.value)]
    return found


def _rebound(ctx: FileContext, scope: Scope, names: set[str], start: ast.AST, two: ast.stmt) -> bool:
    """One of ``names`` is assigned after ``start`` up to ``two``."""
    return any(
        hasattr(node, "lineno") and _between(node, start, two, inclusive_end=True) and set(assigned_names(node)) & names
        for node in scope_nodes(scope)
    )


def _reused_discriminator_outputs(
    ctx: FileContext, scope: Scope, calls: list[BackwardCall], steps: list[OptimizerCall]
) -> Iterator[tuple[Use, list[ast.expr], BackwardCall]]:
    """``out = D(fake)`` computed before the generator step, backpropagated by it (whose optimizer
    then changes the generator), and read again by the discriminator step: its backward walks into
    the generator's graph, freed or changed in place. Yields the use ``D(fake)``, the reads of
    ``out`` (then of ``fake``) in the discriminator step and the generator step's backward."""
    graph = facts(ctx, scope)
    uses = _uses(ctx, scope, graph)
    for first, second, one, _, step_g, step_d in _generator_first_pairs(ctx, scope, calls, steps, ("create_graph",)):
        for use in uses:
            stmt = use.stmt
            if not discriminates(ctx, use.callee, step_d.owner, step_g.owner):
                continue
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _own_output(ctx, scope, stmt.targets[0])):
                continue
            if stmt.value is not use.call or not _before(stmt, one) or innermost_loop(ctx, stmt, scope.node) is not innermost_loop(ctx, one, scope.node):
                continue
            if not _flows(ctx, graph, scope, use, first) or not _flows(ctx, graph, scope, use, second):
                continue
            found = fake_definition(ctx, graph, scope, use)
            if found is None or not roles_hold(ctx, use.callee, producers(ctx, graph, found[1], found[0]), step_d.owner, step_g.owner):
                continue
            reads = _discriminator_reads(ctx, graph, scope, stmt, use, one, second, steps)
            if reads:
                yield use, reads, first
                break


def _own_output(ctx: FileContext, scope: Scope, target: ast.expr) -> bool:
    """A name, or a field ``self.out`` that only this method writes (no other method, no code
    outside the class): nothing between two of its statements rebinds it unseen."""
    if isinstance(target, ast.Name):
        return True
    if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == scope.self_name):
        return False
    cls = scope.class_node
    writes = attribute_writes(ctx, cls).get(target.attr, [])
    return all(w.method.node is scope.node for w in writes) and written_only_in(ctx, cls, target.attr)


def _discriminator_reads(
    ctx: FileContext, graph: GraphFacts, scope: Scope, assign: ast.Assign, use: Use, one: ast.stmt, second: BackwardCall,
    steps: list[OptimizerCall],
) -> list[ast.expr]:
    """The reads of ``out`` (``assign``'s target) after the generator step, where ``D(fake)``
    evaluated again gives the same value: ``out``, the names in the call and the callable's
    parameters unchanged since ``assign``; then the reads of ``fake`` itself there (a gradient
    penalty on it). Empty when ``out`` also reaches ``second`` another way (a value computed from
    it before the generator step)."""
    out = dotted(assign.targets[0]) or ""  # ``out`` or ``self.p_fake``
    two = ctx.statement_of(second.node)
    if _rebound(ctx, scope, names_in(use.call) | {out}, assign, two):
        return []  # ``out``, the fake or the callable rebound before the discriminator step reads them
    if any(_between(s.node, assign, two) and _may_train(ctx, s.owner, use.callee) for s in steps):
        return []  # the callable's parameters change before the discriminator step reads ``out``
    for stmt in scope_nodes(scope):
        if isinstance(stmt, ASSIGNMENTS) and stmt.value is not None and _between(stmt, assign, one):
            if out in flowing_names(ctx, stmt.value) and statement_flows_to(ctx, graph, scope, stmt, second):
                return []  # ``out`` reaches the discriminator loss through a value computed before the generator step
    reads = _reads(ctx, scope, out, one, two)
    return reads + _reads(ctx, scope, use.key, one, two) if reads else []


def _may_train(ctx: FileContext, optimizer: str, module: str) -> bool:
    models = optimizer_params(ctx).get(optimizer)
    return models is None or trains(models, module)








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
        if not discriminates(ctx, use.callee, step_d.owner, step_g.owner):
            continue
        if not _before_or_at(use.stmt, one_stmt) or not _flows(ctx, graph, scope, use, first):
            continue
        later = [u for u in uses if u.callee == use.callee and u.key == use.key and _between(u.stmt, one_stmt, two_stmt, inclusive_end=True)]
        if not any(_flows(ctx, graph, scope, u, second) for u in later) or _flows(ctx, graph, scope, use, second):
            continue
        found = fake_definition(ctx, graph, scope, use)
        if found is None or not all(same_definition(ctx, graph, scope, u, found) for u in later):
            continue  # no single definition of the fake, or it is regenerated for the generator step
        if roles_hold(ctx, use.callee, producers(ctx, graph, found[1], found[0]), step_d.owner, step_g.owner):
            yield use








def _backpropagated_again(ctx: FileContext, scope: Scope, call: BackwardCall, calls: list[BackwardCall]) -> bool:
    """Some other backward call backpropagates the same loss (or a value computed from it)."""
    graph = facts(ctx, scope)
    derived = derived_names(ctx, graph, names_in(call.target), scope_nodes(scope))
    return any(other is not call and reaches(other, derived) for other in calls)
