"""Backward events, in a scope or in the helpers it calls (the GAN rules' interprocedural half of
``gan_steps.py``).

``backward_events`` lists, for a scope, the places where a backward runs with the uses that reach
it: its own backward calls and calls of same-file helpers (``train_discriminator(real, fake)``,
``self.backward_D()``) whose body backpropagates an application of a callable to one of the
helper's inputs (a parameter or a ``self`` attribute). Uses found in a helper are translated into
the caller's names, so a rule can pair a discriminator step with a generator step wherever each
is written.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Optional

from fixer.analysis.calls import BackwardCall, backward_calls, frees_graph
from fixer.analysis.gan_steps import (
    FREEING_KINDS,
    Use,
    after,
    argument_names,
    before_or_at,
    callable_uses,
    flows_to,
    helper_params,
    optimizer_steps,
    position,
    text_of,
)
from fixer.analysis.graph import GraphFacts, facts
from fixer.analysis.names import dotted
from fixer.analysis.callees import called_function
from fixer.analysis.scopes import CALLS, RETURNS, Scope, nodes_of, scope_nodes, scopes
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.shared_graph import flowing_nodes
from fixer.context import FileContext


RETURNED = "return"  # a key for what a helper returns (a keyword: never a parameter's name)


@dataclass(frozen=True)
class MappedUse:
    """A use reaching a backward, with its callable and inputs named as the caller sees them."""

    use: Use  # in ``scope`` (the caller itself or a helper)
    scope: Scope
    callee: str
    keys: frozenset[str]  # the caller's names the used tensor derives from


@dataclass
class Event:
    """One place in a scope where a backward runs: its own call, or a call of a helper."""

    stmt: ast.stmt
    backward: BackwardCall
    helper: Optional[Scope] = None
    uses: list[MappedUse] = field(default_factory=list)
    step: Optional[str] = None  # owner of the optimizer stepped inside the helper after its backward


def backward_events(ctx: FileContext, scope: Scope) -> list[Event]:
    """The scope's freeing backward calls and its calls of same-file helpers that make one; empty
    when it calls no such helper (its own calls alone are the rule's direct case)."""

    def compute() -> list[Event]:
        events: list[Event] = []
        names = _backward_helper_names(ctx)
        if not names or not _mentions_call(ctx, scope, names):
            return []
        for node in nodes_of(scope, CALLS):
            if isinstance(node, ast.Call) and (dotted(node.func) or "").rpartition(".")[2] in names and not under_no_grad(ctx, node):
                helper = called_function(ctx, scope, node.func, imported=False)
                if helper is not None and helper.node is not scope.node and not isinstance(helper.node, ast.Module):
                    events += _helper_events(ctx, scope, node, helper)
        if not events:
            return []
        graph = facts(ctx, scope)
        for call in backward_calls(ctx, scope):
            if call.kind in FREEING_KINDS and frees_graph(call):
                stmt = ctx.statement_of(call.node)
                uses = [MappedUse(u, scope, u.callee, frozenset({u.key})) for u in callable_uses(ctx, scope, graph)
                        if before_or_at(u.stmt, stmt) and flows_to(ctx, graph, scope, u, call)]
                events.append(Event(stmt, call, None, uses))
        return sorted(events, key=lambda e: position(e.stmt))

    return ctx.memo(("gan_events", id(scope.node)), compute)


def may_step_in_helpers(ctx: FileContext) -> bool:
    """Cheap file gate: two optimizer steps in the text and a function or method calling backward."""
    return ctx.memo("gan_helper_gate", lambda: ctx.source.count("step(") >= 2 and bool(_backward_helper_names(ctx)))


def _backward_helper_names(ctx: FileContext) -> frozenset[str]:
    """Names of the file's functions and methods whose text calls backward, or calls one of those
    (the cheap gate: text only, no walk; ``def backward(`` of an autograd Function does not count)."""

    def compute() -> frozenset[str]:
        functions = [(s.node.name, text_of(ctx, s.node)) for s in scopes(ctx) if not isinstance(s.node, ast.Module)]
        found = {name for name, text in functions if text.count("backward(") > text.count("def backward(")}
        if not found:
            return frozenset()
        calling = re.compile(rf"(?:(?<![.\w])|\bself\.)(?:{'|'.join(map(re.escape, sorted(found)))})\s*\(")
        return frozenset(found | {name for name, text in functions if _may_name(text, found) and calling.search(text)})  # one level of nesting

    return ctx.memo("gan_backward_helpers", compute)


def _mentions_call(ctx: FileContext, scope: Scope, names: frozenset[str]) -> bool:
    """The scope's text calls one of ``names`` as a plain function or as a method of ``self``."""

    def compile_pattern() -> re.Pattern:
        alternatives = "|".join(map(re.escape, sorted(names)))
        return re.compile(rf"(?:(?<![.\w])|\bself\.)(?:{alternatives})\s*\(")

    pattern = ctx.memo("gan_helper_call_pattern", compile_pattern)
    if isinstance(scope.node, ast.Module):
        statements = [n for n in scope.node.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        return any(_may_name(text, names) and pattern.search(text) for text in map(lambda n: text_of(ctx, n), statements))
    text = text_of(ctx, scope.node)
    return _may_name(text, names) and pattern.search(text) is not None


def _may_name(text: str, names: frozenset[str]) -> bool:
    """A call of one of ``names`` needs its text: looked for by ``str.find`` before the regex, whose
    lookbehind-led alternation is tried at every character."""
    return any(name in text for name in names)


def _helper_events(ctx: FileContext, scope: Scope, call: ast.Call, helper: Scope, nested: bool = True) -> list[Event]:
    names = argument_names(scope, call, helper)
    if names is None:
        return []
    stmt = ctx.statement_of(call)
    events = []
    for inner in _helper_backwards(ctx, helper, nested):
        uses = []
        for mapped in inner.uses:
            callee = _translate(mapped.callee, names)
            keys = frozenset(k for k in (_translate(key, names, stmt) for key in mapped.keys) if k is not None)
            if callee is not None and keys:
                uses.append(MappedUse(mapped.use, helper, callee, keys))
        step = _translate(inner.step, names) if inner.step else None
        if uses:
            events.append(Event(stmt, inner.backward, helper, uses, step))
    return events


def _helper_backwards(ctx: FileContext, helper: Scope, nested: bool = True) -> list[Event]:
    """Backward calls that always run in the helper, with the uses reaching them named by the
    helper's inputs (its parameters and ``self`` attributes it does not assign); with ``nested``,
    also those of the helpers it always calls (``backward_D_A`` calling ``backward_D_basic(netD,
    real, fake)``), one level deep."""

    def compute() -> list[Event]:
        graph = facts(ctx, helper)
        found = []
        for call in backward_calls(ctx, helper):
            stmt = ctx.statement_of(call.node)
            if call.kind not in FREEING_KINDS or not frees_graph(call) or ctx.parent(stmt) is not helper.node:
                continue  # only calls in the helper's own body (no branch, no loop)
            uses = []
            for use in callable_uses(ctx, helper, graph):
                if before_or_at(use.stmt, stmt) and flows_to(ctx, graph, helper, use, call):
                    keys = _inputs(ctx, helper, graph, use.arg, use.stmt, 3) | _returned_as(helper, use.key) | _kept_on_self(helper, graph, use.arg)
                    if keys:
                        uses.append(MappedUse(use, helper, use.callee, frozenset(keys)))
            if not uses:
                continue
            steps = optimizer_steps(ctx, helper) if "step(" in text_of(ctx, helper.node) else []
            step = next((s.owner for s in steps if after(s.node, stmt) and ctx.parent(ctx.statement_of(s.node)) is helper.node), None)
            found.append(Event(stmt, call, None, uses, step))
        return found + (_nested_backwards(ctx, helper, graph) if nested else [])

    return ctx.memo(("gan_helper_backwards", id(helper.node), nested), compute)


def _nested_backwards(ctx: FileContext, helper: Scope, graph: GraphFacts) -> list[Event]:
    """The events of the helpers ``helper`` calls in its own body, their uses named by its inputs."""
    found = []
    names = _backward_helper_names(ctx)
    for node in scope_nodes(helper):
        if not isinstance(node, ast.Call) or (dotted(node.func) or "").rpartition(".")[2] not in names:
            continue
        stmt = ctx.statement_of(node)
        inner = called_function(ctx, helper, node.func, imported=False)
        if inner is None or inner.node is helper.node or ctx.parent(stmt) is not helper.node or under_no_grad(ctx, node):
            continue
        for event in _helper_events(ctx, helper, node, inner, nested=False):
            uses = []
            for mapped in event.uses:
                keys = {k for key in mapped.keys for k in _inputs(ctx, helper, graph, ast.parse(key, mode="eval").body, stmt, 3)}
                if keys:
                    uses.append(MappedUse(mapped.use, mapped.scope, mapped.callee, frozenset(keys)))
            if uses:
                found.append(Event(stmt, event.backward, None, uses, event.step))
    return found


def _inputs(ctx: FileContext, helper: Scope, graph: GraphFacts, expr: ast.expr, at: ast.AST, depth: int) -> set[str]:
    """The helper's inputs ``expr`` derives from through graph-carrying flow; empty when some
    name it derives from is neither an input nor assigned once."""
    params = helper_params(helper)
    found: set[str] = set()
    for node in _flowing_dotted(ctx, expr):
        name = dotted(node)
        assigned = graph.assignments.get(name, [])
        if not assigned and (name in params or (helper.self_name and name.startswith(helper.self_name + "."))):
            found.add(name)
            continue
        if name == helper.self_name or depth == 0:
            continue
        defs = graph.reaching(name, at) if all(hasattr(s, "lineno") for s, _ in assigned) else []
        if len(defs) != 1 or defs[0][1] is None or under_no_grad(ctx, defs[0][0]):
            continue
        found |= _inputs(ctx, helper, graph, defs[0][1], defs[0][0], depth - 1)
    return found


def _bound_to_result(stmt: ast.stmt, key: str) -> Optional[str]:
    """The name ``stmt`` (``fake, loss = helper(...)``) binds to the returned value ``key`` names."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.value, ast.Call):
        return None
    index, target = key.partition(":")[2], stmt.targets[0]
    if not index:
        return dotted(target) if isinstance(target, (ast.Name, ast.Attribute)) else None
    if isinstance(target, ast.Tuple) and int(index) < len(target.elts) and not isinstance(target.elts[int(index)], ast.Starred):
        return dotted(target.elts[int(index)])
    return None


def _flowing_dotted(ctx: FileContext, expr: ast.expr) -> list[ast.expr]:
    return [n for n in flowing_nodes(ctx, expr) if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n)]


def _kept_on_self(helper: Scope, graph: GraphFacts, arg: ast.expr) -> set[str]:
    """``{"self.fake"}`` when the use reads a field the helper stores (``self.fake = self.G(z)``):
    the caller's object keeps that value after the call, under the same name."""
    name = dotted(arg) if isinstance(arg, ast.Attribute) else None
    if name is None or not helper.self_name or not name.startswith(helper.self_name + ".") or not graph.assignments.get(name):
        return set()
    return {name}


def _returned_as(helper: Scope, key: str) -> set[str]:
    """``{RETURNED}`` or ``{RETURNED + ":i"}`` when every return of the helper gives back its local
    ``key`` (whole, or as element ``i`` of a tuple): the caller names it where it binds the result."""
    places = set()
    for ret in (n for n in nodes_of(helper, RETURNS) if isinstance(n, ast.Return)):
        value = ret.value
        if isinstance(value, ast.Tuple):
            places.add(next((f"{RETURNED}:{i}" for i, e in enumerate(value.elts) if dotted(e) == key), None))
        else:
            places.add(RETURNED if value is not None and dotted(value) == key else None)
    return places if len(places) == 1 and None not in places else set()


def _translate(name: str, names: dict[str, Optional[str]], stmt: Optional[ast.stmt] = None) -> Optional[str]:
    if name.startswith(RETURNED):  # the caller's name for what the helper returned
        return _bound_to_result(stmt, name) if stmt is not None else None
    head, dot, rest = name.partition(".")
    if head in names:
        base = names[head]
        return None if base is None else base + dot + rest
    return name  # a global: the same name in the caller
