"""## What it does
Finds GAN training steps whose discriminator loss is computed on the generator's output without
`.detach()` (`D(fake)`), backpropagated and stepped, while the generator step that follows makes
its own fake (`fake = G(z)` again) and backpropagates through that one. Nothing crashes: the
discriminator's backward walks on through the generator's whole graph for nothing. Common in
WGAN-GP code that regenerates the fake every `n_critic` steps.

The roles are proven as for GF103 (`fake-not-detached-for-discriminator`): the discriminator
step's optimizer is built from the callable's parameters and not the producer's, the generator
step's optimizer from the producer's and not the callable's. The rule stays silent when anything
else in the discriminator step reads the fake's graph (a gradient penalty differentiating with
respect to `fake` itself, as in WGAN-div, needs it), and when the generator step reuses the same
fake (GF103 reports that: it crashes).

## Why is this bad?
The discriminator's backward computes gradients for every generator parameter on every
discriminator step, a full backward pass through the generator that no step uses. Where the
generator's gradients are not zeroed between that backward and the generator's own backward,
they are added to the generator's gradients, so the generator also descends the discriminator's
loss: it is pushed to make its fakes *easier* to spot.

## Example
```python
fake = G(z)
d_loss = -D(real).mean() + D(fake).mean()
opt_d.zero_grad(); d_loss.backward(); opt_d.step()
fake = G(z)
g_loss = -D(fake).mean()
opt_g.zero_grad(); g_loss.backward(); opt_g.step()
```

## Use instead
```python
d_loss = -D(real).mean() + D(fake.detach()).mean()
```

## Fix safety
Safe when the generator's gradients are zeroed (`opt_g.zero_grad()`, `G.zero_grad()`, an
optimizer over the same parameters) after the discriminator's backward and before the
generator's, unconditionally: the discriminator's gradients are those of the same loss, the
generator's were discarded anyway, so every gradient the steps use and every parameter is
unchanged; only the wasted backward is gone. Unsafe otherwise: the generator no longer receives
the discriminator loss's gradients, so its gradients and parameters change, to those of its own
loss alone (the bug removed).
"""

from __future__ import annotations

import ast
from typing import Iterator

from fixer.analysis.calls import BackwardCall, OptimizerCall, backward_calls, optimizer_calls
from fixer.analysis.gan_fakes import fake_definition, same_definition
from fixer.analysis.gan_roles import discriminates, producers, roles_hold
from fixer.analysis.gan_steps import FREEING_KINDS, Use, before_or_at, between, callable_uses, carried_within, flows_to
from fixer.analysis.gan_steps import after as _after
from fixer.analysis.gan_steps import discriminator_generator_pairs, optimizer_steps, use_key
from fixer.analysis.graph import facts
from fixer.analysis.names import dotted, qualified
from fixer.analysis.protocol import zeroes_for
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.analysis.shared_graph import flowing_nodes, runs_after_in_same_pass
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.rule import Applicability, Diagnostic, Edit, Rule

READING = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)


class DiscriminatorBackwardIntoGenerator(Rule):
    code = "GF303"
    name = "discriminator-backward-into-generator"
    summary = "The discriminator step backpropagates through the generator, whose own step makes a new fake"
    fix_safety = "mixed"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        reported: set[int] = set()
        for scope in scopes(ctx):
            calls = [c for c in backward_calls(ctx, scope) if c.kind in FREEING_KINDS]
            if len(calls) < 2:
                continue
            steps = optimizer_steps(ctx, scope)
            if len({s.owner for s in steps}) < 2:  # one optimizer: no generator and discriminator steps
                continue
            for first, second in discriminator_generator_pairs(ctx, scope, calls):
                found = _undetached_uses(ctx, scope, first, second, steps)
                if found and not any(id(u.arg) in reported for u in found[0]):
                    uses, step_g = found
                    reported.update(id(u.arg) for u in uses)
                    yield self._report(ctx, scope, uses, first, second, step_g)

    def _report(self, ctx: FileContext, scope: Scope, uses: list[Use], first: BackwardCall, second: BackwardCall, step_g: OptimizerCall) -> Diagnostic:
        text = ctx.text(uses[0].arg)
        safe = _zeroed_between(ctx, scope, first, second, step_g.owner)
        return self.diagnostic(
            ctx,
            uses[0].arg,
            f"The discriminator loss backpropagates through `{text}` into the generator, whose step makes and "
            f"backpropagates a fake of its own: a wasted backward through the generator"
            + ("" if safe else ", whose gradients it adds to the generator's (they are not zeroed in between)")
            + f"; use `{text}.detach()` in the discriminator step",
            [Edit(*ctx.span(u.arg), f"{ctx.text(u.arg)}.detach()") for u in uses],
            Applicability.SAFE if safe else Applicability.UNSAFE,
            title=f"Detach `{text}` for the discriminator",
        )


def _undetached_uses(ctx: FileContext, scope: Scope, first: BackwardCall, second: BackwardCall, steps: list[OptimizerCall]):
    """The discriminator's applications to the fake reaching ``first`` (all of the fake's
    graph-carrying reads there), when the generator step behind ``second`` uses a new fake."""
    graph = facts(ctx, scope)
    one, two = ctx.statement_of(first.node), ctx.statement_of(second.node)
    step_d = next((s for s in steps if between(s.node, one, two)), None)
    step_g = next((s for s in steps if _after(s.node, two) and _same_block_pass(ctx, scope, two, s.node)), None)
    if step_d is None or step_g is None or step_d.owner == step_g.owner:
        return None
    uses = callable_uses(ctx, scope, graph)
    for use in uses:
        if not discriminates(ctx, use.callee, step_d.owner, step_g.owner):
            continue
        if not before_or_at(use.stmt, one) or not flows_to(ctx, graph, scope, use, first) or flows_to(ctx, graph, scope, use, second):
            continue
        found = fake_definition(ctx, graph, scope, use)
        if found is None or not roles_hold(ctx, use.callee, producers(ctx, graph, found[1], found[0]), step_d.owner, step_g.owner):
            continue
        later = [u for u in uses if u.callee == use.callee and u.key == use.key and between(u.stmt, one, two, inclusive_end=True)
                 and flows_to(ctx, graph, scope, u, second)]
        if not later or any(same_definition(ctx, graph, scope, u, found) for u in later):
            continue  # the generator step does not use the discriminator on a fake, or reuses this one (GF103)
        if not all(_regenerated(ctx, graph, scope, u, one, use.callee, step_d, step_g) for u in later):
            continue
        detached = [u for u in uses if u.key == use.key and same_definition(ctx, graph, scope, u, found)
                    and before_or_at(u.stmt, one) and u.callee == use.callee and flows_to(ctx, graph, scope, u, first)]
        if _other_reads(ctx, scope, use.key, found[0], one, {id(u.arg) for u in detached}):
            continue  # a gradient penalty with respect to the fake, or the fake in another loss
        if _may_freeze(ctx, scope, producers(ctx, graph, found[1], found[0])):
            continue  # ``requires_grad(G, False)`` for the discriminator step: no walk into G at all
        return detached, step_g
    return None


def _regenerated(ctx, graph, scope, use: Use, one: ast.stmt, callee: str, step_d: OptimizerCall, step_g: OptimizerCall) -> bool:
    """The generator step's fake is made after the discriminator's backward, by the generator."""
    found = fake_definition(ctx, graph, scope, use)
    if found is None or not between(found[0], one, use.stmt, inclusive_end=True):
        return False
    return roles_hold(ctx, callee, producers(ctx, graph, found[1], found[0]), step_d.owner, step_g.owner)


def _other_reads(ctx: FileContext, scope: Scope, key: str, definition: ast.AST, one: ast.stmt, allowed: set[int]) -> bool:
    """A graph-carrying read of ``key`` after its definition up to the discriminator's backward
    other than the applications about to be detached."""
    for stmt in scope_nodes(scope):
        if not isinstance(stmt, READING) or stmt.value is None or not between(stmt, definition, one, inclusive_end=True):
            continue
        for node in flowing_nodes(ctx, stmt.value):
            if use_key(node) == key and id(node) not in allowed and carried_within(ctx, node, stmt.value):
                return True
    return False


def _may_freeze(ctx: FileContext, scope: Scope, modules: frozenset[str]) -> bool:
    """The scope may switch a producer's ``requires_grad``: it passes the module (or its
    parameters) to a function that is not torch's, calls ``requires_grad_`` on it, or assigns
    ``requires_grad`` of its parameters."""
    for node in scope_nodes(scope):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "requires_grad_" and _of_module(func.value, modules):
                return True
            if not (qualified(ctx, func) or "").startswith("torch.") and any(_of_module(a, modules) for a in node.args):
                return True
        elif isinstance(node, ast.For) and _of_module(node.iter, modules):
            if any(isinstance(n, ast.Attribute) and n.attr == "requires_grad" and isinstance(n.ctx, ast.Store) for n in walk(node)):
                return True
    return False


def _of_module(expr: ast.expr, modules: frozenset[str]) -> bool:
    """``G``, ``G.module``, ``G.parameters()``."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in ("parameters", "named_parameters"):
        expr = expr.func.value
    name = dotted(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else None
    return name is not None and any(name == m or name.startswith(m + ".") for m in modules)


def _same_block_pass(ctx: FileContext, scope: Scope, two: ast.stmt, node: ast.AST) -> bool:
    return runs_after_in_same_pass(ctx, scope, two, ctx.statement_of(node))


def _zeroed_between(ctx: FileContext, scope: Scope, first: BackwardCall, second: BackwardCall, generator_opt: str) -> bool:
    """A zero_grad clearing the generator optimizer's gradients runs every time after ``first``
    and before ``second``: it sits in a block that holds ``second``, after ``first`` in the same pass."""
    one, two = ctx.statement_of(first.node), ctx.statement_of(second.node)
    for call in optimizer_calls(ctx, scope):
        if call.kind != "zero_grad" or call.owner is None or zeroes_for(ctx, call.owner, generator_opt) is not True:
            continue
        stmt = ctx.statement_of(call.node)
        if not (isinstance(stmt, ast.Expr) and stmt.value is call.node):
            continue
        block = ctx.parent(stmt)
        if not any(parent is block for parent in ctx.ancestors(two)):
            continue  # in a branch the generator's backward is not in
        if runs_after_in_same_pass(ctx, scope, one, stmt, allow_first_loop=True) and runs_after_in_same_pass(ctx, scope, stmt, two):
            return True
    return False
