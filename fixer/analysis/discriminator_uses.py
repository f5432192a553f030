"""Where a discriminator step backpropagates into the generator's graph (GF103's query): a
discriminator use of a fake that the generator step needs again (``d_loss`` through ``D(fake)``
first), one the generator step already backpropagated and stepped (the generator step first),
an output ``out = D(fake)`` the generator step backpropagated and the discriminator step reads
again, and the same through same-file helpers that backpropagate (``gan_events.py``)."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.calls import BackwardCall, OptimizerCall
from fixer.analysis.gan_fakes import caller_fake, fake_definition, same_definition
from fixer.analysis.gan_roles import discriminates, producers, roles_hold, trains
from fixer.analysis.gan_events import backward_events
from fixer.analysis.gan_steps import Use, use_key
from fixer.analysis.gan_steps import after as _after, before as _before
from fixer.analysis.gan_steps import before_or_at as _before_or_at
from fixer.analysis.gan_steps import between as _between
from fixer.analysis.gan_steps import callable_uses as _uses
from fixer.analysis.gan_steps import carried_within
from fixer.analysis.gan_steps import flows_to as _flows
from fixer.analysis.gan_steps import optimizer_steps as _steps
from fixer.analysis.gan_steps import ASSIGNMENTS, statement_flows_to
from fixer.analysis.graph import GraphFacts, facts
from fixer.analysis.graph_reuse import assigned_names, derived_names, flowing_names, innermost_loop, names_in, reaches
from fixer.analysis.class_model import attribute_writes, written_only_in
from fixer.analysis.names import dotted
from fixer.analysis.protocol import optimizer_params
from fixer.analysis.scopes import Scope, scope_nodes
from fixer.analysis.shared_graph import flowing_nodes, runs_after_in_same_pass, same_pass_later
from fixer.context import FileContext


READING = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)


def helper_discriminator_uses(ctx: FileContext, scope: Scope) -> Iterator[tuple[Use, bool, ast.stmt]]:
    """Discriminator uses where a step runs in a helper: ``train_discriminator(real, fake)`` or
    ``self.backward_D()`` followed by a generator step (a helper or inline) through the same fake
    (False), or following a generator step that already backpropagated it and stepped (True:
    ``self.backward_G()`` first, its backward freed the generator's graph); with the statement of
    ``scope`` that runs the discriminator step."""
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
            step_1 = first.step or next((s.owner for s in steps if _between(s.node, first.stmt, second.stmt)), None)
            step_2 = second.step or next(
                (s.owner for s in steps if _after(s.node, second.stmt) and innermost_loop(ctx, s.node, scope.node) is loop), None
            )
            if step_1 is None or step_2 is None or step_1 == step_2:
                continue
            frees = all(first.backward.keyword(flag) is None for flag in ("create_graph", "retain_graph"))
            orders = [(first, second, step_1, step_2, False)] + ([(second, first, step_2, step_1, True)] if frees else [])
            for d_step, g_step, step_d, step_g, generator_first in orders:
                for d in d_step.uses:
                    if any(_same_fake(ctx, scope, graph, d, g, (first, second), step_d, step_g) for g in g_step.uses):
                        yield d.use, generator_first, d_step.stmt


def _same_fake(ctx: FileContext, scope: Scope, graph: GraphFacts, d, g, events, step_d: str, step_g: str) -> bool:
    """The discriminator step's use ``d`` and the generator step's ``g`` apply one callable to a
    fake both read, made by a module the generator step's optimizer trains."""
    if g.callee != d.callee or g.use is d.use:
        return False
    first, second = events
    for key in sorted(d.keys & g.keys):
        made_by = caller_fake(ctx, scope, graph, key, first.stmt, second.stmt, (first.helper, second.helper))
        if made_by and roles_hold(ctx, d.callee, made_by, step_d, step_g):
            return True
    return False


def discriminator_steps_after_generator(
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


def reused_discriminator_outputs(
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


def discriminator_uses(
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


def backpropagated_again(ctx: FileContext, scope: Scope, call: BackwardCall, calls: list[BackwardCall]) -> bool:
    """Some other backward call backpropagates the same loss (or a value computed from it)."""
    graph = facts(ctx, scope)
    derived = derived_names(ctx, graph, names_in(call.target), scope_nodes(scope))
    return any(other is not call and reaches(ctx, other, derived) for other in calls)


def reaches_besides(ctx: FileContext, scope: Scope, call: BackwardCall, fake: ast.expr, uses: list[ast.expr]) -> bool:
    """The tensor ``call`` backpropagates carries ``fake``'s graph other than through ``uses`` (its
    discriminator applications, about to be detached): a gradient penalty on an interpolate of it
    (``gp = penalty(D, real, fake)``), a feature-matching term. Followed through the scope's
    statements before the backward, in order; a name reached only under ``.detach()`` does not
    count, and ``out["real"]`` is not ``out["fake"]`` (but ``out`` itself holds it)."""
    key, skipped = use_key(fake), {id(u) for u in uses}
    if key is None:
        return True  # no name to follow: not proven
    holder = key.partition("[")[0] if "[" in key else None
    carriers, end = {key}, ctx.statement_of(call.node)

    def carries(expr: ast.expr) -> bool:
        read = _read_keys(ctx, expr, skipped)
        return bool(read & carriers) or holder in read

    for stmt in (s for s in scope_nodes(scope) if isinstance(s, ASSIGNMENTS) and _before(s, end)):
        if stmt.value is not None and carries(stmt.value):
            carriers |= set(assigned_names(stmt)) - {key}
    return carries(call.target)


def _read_keys(ctx: FileContext, expr: ast.expr, skipped: set[int]) -> set[str]:
    """What ``expr`` reads with its graph: names, and ``out["k"]`` slots by their key."""
    found = set()
    for node in flowing_nodes(ctx, expr):
        if not isinstance(node, (ast.Name, ast.Attribute)) or id(node) in skipped:
            continue
        parent = ctx.parent(node)
        slot = use_key(parent) if isinstance(parent, ast.Subscript) and parent.value is node else None
        if slot is not None:
            if id(parent) not in skipped:
                found.add(slot)
        elif (name := dotted(node)) is not None:
            found.add(name)
    return found
