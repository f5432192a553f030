"""A discriminator step on an undetached fake whose generator step makes a fake of its own
(GF303's query): the discriminator's applications to the fake that reach its backward, when the
generator step after it backpropagates a new fake from the same producer (roles proven as for
GF103), nothing else in the discriminator step reads the fake's graph (a gradient penalty on the
fake) and the scope cannot switch the producer's ``requires_grad``; and whether the generator's
gradients are zeroed between the two backward calls (then detaching changes no gradient)."""

from __future__ import annotations

import ast

from fixer.analysis.calls import BackwardCall, OptimizerCall, optimizer_calls
from fixer.analysis.discriminator_uses import READING
from fixer.analysis.gan_fakes import fake_definition, same_definition
from fixer.analysis.gan_roles import discriminates, producers, roles_hold
from fixer.analysis.gan_steps import Use, before_or_at, between, callable_uses, carried_within, flows_to
from fixer.analysis.gan_steps import after as _after
from fixer.analysis.gan_steps import use_key
from fixer.analysis.graph import facts
from fixer.analysis.names import dotted, qualified
from fixer.analysis.protocol import zeroes_for
from fixer.analysis.scopes import Scope, scope_nodes
from fixer.analysis.shared_graph import flowing_nodes, runs_after_in_same_pass
from fixer.context import FileContext
from fixer.nodes import walk


def undetached_uses(ctx: FileContext, scope: Scope, first: BackwardCall, second: BackwardCall, steps: list[OptimizerCall]):
    """The discriminator's applications to the fake reaching ``first`` (all of the fake's
    graph-carrying reads there), when the generator step behind ``second`` uses a new fake."""
    one, two = ctx.statement_of(first.node), ctx.statement_of(second.node)
    step_d = next((s for s in steps if between(s.node, one, two)), None)
    if step_d is None:
        return None
    # the generator step: any later step of the pass (``opt_enc.step(); opt_gen.step()``) whose roles hold
    for step_g in (s for s in steps if _after(s.node, two) and _same_block_pass(ctx, scope, two, s.node) and s.owner != step_d.owner):
        found = _undetached_for(ctx, scope, first, second, step_d, step_g)
        if found is not None:
            return found
    return None


def _undetached_for(ctx: FileContext, scope: Scope, first: BackwardCall, second: BackwardCall, step_d: OptimizerCall, step_g: OptimizerCall):
    graph = facts(ctx, scope)
    one, two = ctx.statement_of(first.node), ctx.statement_of(second.node)
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


def zeroed_between(ctx: FileContext, scope: Scope, first: BackwardCall, second: BackwardCall, generator_opt: str) -> bool:
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
