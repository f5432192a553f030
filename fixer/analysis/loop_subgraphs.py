"""Graphs built once and backpropagated through on every pass (GF102's query): a value built
before a loop whose every iteration frees its graph with a backward, or keeps it with
``retain_graph=True`` while the loop updates its leaves (``built_once_graphs``); and where it can
be rebuilt: the loop statement that first reads it, whether the original may go, the top-level
graphs a module-level value reads (rebuilt first, in order), a value of ``__init__`` that reads
only ``self`` and imports. A loop of discriminator steps on an undetached fake is GF103's."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Optional

from fixer.analysis.bindings import imported_names
from fixer.analysis.names import dotted
from fixer.analysis.built_before_loop import body_nodes, built_before, recompute_kind, updates_leaves
from fixer.analysis.calls import BackwardCall, backward_call, backward_calls, frees_graph
from fixer.analysis.graph import Kind, facts
from fixer.analysis.held_values import held_name
from fixer.analysis.graph_reuse import derived_names, innermost_loop, inside, reaches, repeats_per_iteration
from fixer.analysis.passes import is_pass_filter
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.analysis.trainable_inputs import may_be_stepped
from fixer.analysis.training_calls import training_calls
from fixer.analysis.undetached_fakes import undetached_fake_lines
from fixer.context import FileContext
from fixer.nodes import walk

INLINE_ONLY = (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)  # not copied into another place


@dataclass
class BuiltOnce:
    name: str
    stmt: ast.Assign
    loop: ast.AST
    calls: list[BackwardCall] = field(default_factory=list)
    band_aid: bool = False  # the loop's backward already passes retain_graph=True


def built_once_graphs(ctx: FileContext, scope: Scope) -> list[BuiltOnce]:
    calls = backward_calls(ctx, scope) + training_calls(ctx, scope)
    if not calls:
        return []
    graph = facts(ctx, scope)
    found: dict[tuple[int, int], BuiltOnce] = {}
    for call in calls:
        loop = innermost_loop(ctx, call.node, scope.node)
        if loop is None or not repeats_per_iteration(ctx, call, loop):
            continue
        band_aid = call.flag("retain_graph") is True and call.keyword("create_graph") is None
        if not (frees_graph(call) or band_aid):
            continue
        body = body_nodes(ctx, loop)
        for name, stmt in built_before(ctx, scope, graph, loop, body):
            if reaches(ctx, call, derived_names(ctx, graph, {name}, body)):
                finding = found.setdefault((id(stmt), id(loop)), BuiltOnce(name, stmt, loop))
                finding.calls.append(call)
                finding.band_aid |= band_aid
    # retain_graph=True keeps the shared graph: wrong only when the loop updates its leaves
    # (stale values, or "modified by an inplace operation"), and then recomputing is the fix; a
    # step changes them only when it may reach them (collocation points no optimizer is given: no)
    return [
        f for f in found.values()
        if (not f.band_aid or (updates_leaves(ctx, graph, scope, f.stmt.value, f.loop)
                               and may_be_stepped(ctx, graph, f.stmt.value, f.stmt)
                               and recompute_kind(ctx, graph, scope, f.stmt, f.loop) is not None))
        and not _gan_step_in(ctx, f.loop)
    ]


def _gan_step_in(ctx: FileContext, loop: ast.AST) -> bool:
    """GF103 names the cause here: the loop's steps are discriminator steps on an undetached fake
    built before it (n_critic steps); recomputing the fake would not help the generator step."""
    lines = undetached_fake_lines(ctx)
    return any(loop.lineno <= line <= loop.end_lineno for line in lines)


def holder_bindings(ctx: FileContext, scope: Scope, found: BuiltOnce) -> Optional[list[ast.Assign]]:
    """The bindings of the holders through which the loop reads the value (``out = {"loss": loss}``
    before the loop, read as ``out["loss"]``, held_values): rebuilt with it, after it; None when
    one is not a statement of the value's own block after it."""
    block = getattr(ctx.parent(found.stmt), "body", [])
    found_at = next((i for i, s in enumerate(block) if s is found.stmt), None)
    bindings: list[ast.Assign] = []
    for read in _held_reads(ctx, scope, found):
        defs = facts(ctx, scope).reaching(dotted(read.value) or "", read)
        at = next((i for i, s in enumerate(block) if len(defs) == 1 and s is defs[0][0]), None)
        if found_at is None or at is None or at <= found_at or not isinstance(block[at], ast.Assign):
            return None
        if all(b is not block[at] for b in bindings):
            bindings.append(block[at])
    return sorted(bindings, key=lambda b: b.lineno)


def _held_reads(ctx: FileContext, scope: Scope, found: BuiltOnce) -> list[ast.expr]:
    return [n for n in body_nodes(ctx, found.loop) if isinstance(n, (ast.Subscript, ast.Attribute))
            and isinstance(n.ctx, ast.Load) and (held := held_name(ctx, scope, n)) is not None and held.id == found.name]


def first_use_statement(ctx: FileContext, scope: Scope, found: BuiltOnce) -> Optional[ast.stmt]:
    """The statement of the loop body holding the first read of the value (or of a holder of it),
    inside the passes a filter selects when the filter's test does not read it."""
    uses = [n for n in body_nodes(ctx, found.loop) if isinstance(n, ast.Name) and n.id == found.name and isinstance(n.ctx, ast.Load)]
    uses += _held_reads(ctx, scope, found)
    target = next((s for s in found.loop.body if any(u is s or inside(ctx, u, s) for u in uses)), None)
    while is_pass_filter(ctx, target) and not any(inside(ctx, u, target.test) for u in uses):
        target = next((s for s in target.body if any(u is s or inside(ctx, u, s) for u in uses)), None)
    return target


def original_unneeded(ctx: FileContext, scope: Scope, found: BuiltOnce) -> bool:
    """Nothing outside the loop reads the value, and its assignment is one statement of several in
    a block that holds the loop: once recomputed in the loop, the original can go."""
    stmt, loop = found.stmt, found.loop
    elsewhere = [
        n for n in scope_nodes(scope)
        if isinstance(n, ast.Name) and n.id == found.name and isinstance(n.ctx, ast.Load) and not inside(ctx, n, loop)
    ]
    siblings = getattr(ctx.parent(stmt), "body", [])
    return not elsewhere and stmt in siblings and len(siblings) > 1 and inside(ctx, loop, ctx.parent(stmt))


def only_backward_in(ctx: FileContext, loop: ast.AST) -> bool:
    return len([n for n in body_nodes(ctx, loop) if isinstance(n, ast.Call) and backward_call(ctx, n)]) == 1


def method_bound_names(scope: Scope) -> set[str]:
    """The names the method binds: its parameters and every name it assigns."""
    own = {n.id for n in scope_nodes(scope) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    args = scope.node.args
    return own | {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} | {a.arg for a in (args.vararg, args.kwarg) if a}


def top_level_chain(ctx: FileContext, stmt: ast.Assign, own: set[str], seen: set[str]) -> Optional[list[tuple[str, ast.expr]]]:
    """The top-level graphs ``stmt``'s value reads, as (name, value) in the order they are rebuilt;
    None when a name it reads is not bound once at the top level (or imported), or is in ``own``."""
    module = facts(ctx, scopes(ctx)[0])
    if not ctx.is_own_line(stmt) or stmt.lineno != stmt.end_lineno:
        return None
    chain: list[tuple[str, ast.expr]] = []
    for node in walk(stmt.value):
        if isinstance(node, INLINE_ONLY):
            return None
        if not isinstance(node, ast.Name) or node.id in imported_names(ctx):
            continue
        defs = module.assignments.get(node.id, [])
        if node.id in own or len(defs) != 1 or ctx.parent(defs[0][0]) is not ctx.tree:
            return None
        source, value = defs[0]
        if node.id in seen or value is None or module.kind(value, source) != Kind.GRAPH:
            continue
        if not (isinstance(source, ast.Assign) and len(source.targets) == 1 and isinstance(source.targets[0], ast.Name)):
            return None
        seen.add(node.id)
        inner = top_level_chain(ctx, source, own, seen)
        if inner is None:
            return None
        chain += inner + [(node.id, value)]
    return chain


def reads_only_self(ctx: FileContext, scope: Scope, stmt: ast.Assign) -> bool:
    """``self.x = <value>`` of ``__init__`` on one line reads only ``self`` (the method's too) and
    imported names (``self.L @ self.L.t()``): the method can build it from the current parameters."""
    init = next(p for p in ctx.ancestors(stmt) if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)))
    self_name = init.args.args[0].arg if init.args.args else None
    allowed = {self_name} | imported_names(ctx)
    if self_name != scope.self_name or not ctx.is_own_line(stmt) or stmt.lineno != stmt.end_lineno:
        return False
    if any(isinstance(n, ast.Name) and n.id not in allowed for n in walk(stmt.value)):
        return False
    return not any(isinstance(n, INLINE_ONLY) for n in walk(stmt.value))
