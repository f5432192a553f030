"""GAN steps: which callable a tensor is fed to, which optimizer steps after a backward, and
backward calls made inside helper functions or methods of the same file.

``callable_uses`` lists ``D(fake)``-like applications of a callable to a named tensor;
``backward_events`` lists, for a scope, the places where a backward runs with the uses that reach
it: its own backward calls and calls of same-file helpers (``train_discriminator(real, fake)``,
``self.backward_D()``) whose body backpropagates an application of a callable to one of the
helper's inputs (a parameter or a ``self`` attribute). Uses found in a helper are translated into
the caller's names, so a rule can pair a discriminator step with a generator step wherever each
is written.
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass, field
from typing import Iterator, Optional

from fixer.analysis.calls import BackwardCall, OptimizerCall, backward_calls, optimizer_calls
from fixer.analysis.graph import DETACHING_METHODS, GraphFacts, Kind, facts
from fixer.analysis.graph_reuse import flows_straight, frees_graph, innermost_loop
from fixer.analysis.shared_graph import flowing_nodes, runs_after_in_same_pass, same_pass_later
from fixer.analysis.names import dotted, qualified
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.callees import called_function
from fixer.analysis.protocol import optimizer_params
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.context import FileContext

FREEING_KINDS = ("method", "owner", "scaler", "autograd.backward")


@dataclass(frozen=True)
class Use:
    """``callable(..., fake, ...)``: one application of a callable to the fake tensor."""

    call: ast.Call
    arg: ast.expr
    callee: str
    key: str
    stmt: ast.stmt



def optimizer_steps(ctx: FileContext, scope: Scope) -> list[OptimizerCall]:
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
    return sorted(found, key=lambda o: position(o.node))



def callable_uses(ctx: FileContext, scope: Scope, graph: GraphFacts, depth: int = 2) -> list[Use]:
    """Applications of a callable (not a torch function, not a tensor method) to a named tensor;
    a loss helper of the project that applies one of its parameters to another and returns the
    result (``compute_loss(D, real, fake)`` returning ``bce(D(fake), zeros)``) is that
    application, named as the caller sees it (``D`` on ``fake``, at the helper's call)."""

    def compute() -> list[Use]:
        found = []
        for node in scope_nodes(scope):
            if not isinstance(node, ast.Call) or under_no_grad(ctx, node):
                continue
            callee = dotted(node.func)
            if callee is None or (qualified(ctx, node.func) or "").startswith("torch.") or _is_tensor_method(graph, node):
                continue
            stmt = ctx.statement_of(node)
            for arg in node.args:
                key = use_key(arg)
                if key is not None:
                    found.append(Use(node, arg, callee, key, stmt))
            if depth > 0:
                found += _loss_helper_uses(ctx, scope, node, stmt, depth - 1)
        return found

    return ctx.memo(("gan_uses", id(scope.node), depth), compute)


def _loss_helper_uses(ctx: FileContext, scope: Scope, call: ast.Call, stmt: ast.stmt, depth: int) -> list[Use]:
    """The helper's own uses whose callable and tensor are its parameters and whose result it
    returns, as uses of the caller's arguments at ``call``. A helper that backpropagates or steps
    is a step function (``backward_events``), not a loss."""
    helper = called_function(ctx, scope, call.func)
    if helper is None or isinstance(helper.node, ast.Module) or helper.node is scope.node or helper.self_name:
        return []
    own = helper.ctx or ctx
    text = _text(own, helper.node)
    if "backward" in text or "step(" in text or "yield" in text:
        return []
    names = _argument_names(scope, call, helper)
    arguments = _argument_nodes(call, helper)
    if names is None or arguments is None:
        return []
    found = []
    for use in callable_uses(own, helper, facts(own, helper), depth):
        arg = arguments.get(use.key)
        callee = names.get(use.callee.partition(".")[0]) if use.callee.partition(".")[0] in names else None
        if arg is None or callee is None or use.key not in names or not _returned(own, helper, use):
            continue
        key = use_key(arg)
        if key is not None:
            found.append(Use(call, arg, callee + use.callee[len(use.callee.partition(".")[0]):], key, stmt))
    return found


def _argument_nodes(call: ast.Call, helper: Scope) -> Optional[dict[str, ast.expr]]:
    """Parameter -> the argument expression the call gives it."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    nodes = dict(zip(_params(helper, keyword_only=False), call.args))
    nodes.update({k.arg: k.value for k in call.keywords if k.arg in _params(helper)})
    return nodes


def _returned(ctx: FileContext, helper: Scope, use: Use) -> bool:
    """The use's result flows into what the helper returns: it sits in a ``return``, or in an
    assignment of a name that a ``return`` reads (directly or through further assignments)."""
    wanted = {use.stmt}
    returns = [n for n in scope_nodes(helper) if isinstance(n, ast.Return) and n.value is not None]
    names: set[str] = set()
    for _ in range(4):
        for stmt in list(wanted):
            if isinstance(stmt, ast.Return):
                return True
            if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if any(isinstance(n, ast.Name) and n.id in names for r in returns for n in ast.walk(r.value)):
            return True
        wanted = {
            n for n in scope_nodes(helper)
            if isinstance(n, (ast.Assign, ast.AugAssign)) and any(isinstance(m, ast.Name) and m.id in names for m in ast.walk(n.value))
        }
    return False



def _is_tensor_method(graph: GraphFacts, call: ast.Call) -> bool:
    func = call.func
    return isinstance(func, ast.Attribute) and (func.attr in DETACHING_METHODS or graph.kind(func.value, call) >= Kind.LEAF)



def use_key(node: ast.expr) -> Optional[str]:
    """``fake``, ``self.fake``, ``out["fake"]``."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        return dotted(node)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, (str, int)):
        base = dotted(node.value)
        return f"{base}[{node.slice.value!r}]" if base else None
    return None



def flows_to(ctx: FileContext, graph: GraphFacts, scope: Scope, use: Use, call: BackwardCall) -> bool:
    """The callable's result at ``use`` reaches the tensor ``call`` backpropagates, through
    graph-carrying sub-expressions only: ``D(x).detach()``, ``D(x).item()``, ``D(x) > 0`` and
    ``fake = G(z).detach()`` (for a use ``G(z)``) carry nothing on."""
    stmt = use.stmt
    if stmt is ctx.statement_of(call.node):
        return carried_within(ctx, use.call, call.target)
    if not isinstance(stmt, ASSIGNMENTS) or stmt.value is None or not carried_within(ctx, use.call, stmt.value):
        return False
    return statement_flows_to(ctx, graph, scope, stmt, call)


def statement_flows_to(ctx: FileContext, graph: GraphFacts, scope: Scope, stmt: ast.stmt, call: BackwardCall) -> bool:
    """The value the assignment ``stmt`` binds reaches the tensor ``call`` backpropagates."""
    assignments, starts = _assignments(ctx, scope)
    first = bisect.bisect_left(starts, (stmt.end_lineno, stmt.end_col_offset))
    last = bisect.bisect_right(starts, position(call.node))
    return flows_straight(ctx, graph, stmt, assignments[first:last], call)


ASSIGNMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign)


def carried_within(ctx: FileContext, node: ast.expr, root: ast.expr) -> bool:
    """``node``'s value is part of ``root``'s graph: ``node`` is ``root`` or one of its
    graph-carrying sub-expressions (not under ``.detach()``, ``.data``, ``.item()``, no_grad or a
    comparison)."""
    if node is root:
        return True
    if not any(n is node for n in flowing_nodes(ctx, root)):
        return False
    for parent in ctx.ancestors(node):
        if parent is root:
            return True
        if isinstance(parent, ast.Compare):
            return False
    return False


def _assignments(ctx: FileContext, scope: Scope) -> tuple[list[ast.stmt], list[tuple[int, int]]]:
    """The scope's assignments in source order, with their start positions (for bisecting)."""

    def compute() -> tuple[list[ast.stmt], list[tuple[int, int]]]:
        found = [n for n in scope_nodes(scope) if isinstance(n, ASSIGNMENTS)]
        return found, [position(n) for n in found]

    return ctx.memo(("assignments", id(scope.node)), compute)



def position(node: ast.AST) -> tuple[int, int]:
    return (node.lineno, node.col_offset)



def before(a: ast.AST, b: ast.AST) -> bool:
    return (a.end_lineno, a.end_col_offset) <= position(b)



def after(a: ast.AST, b: ast.AST) -> bool:
    return position(a) >= (b.end_lineno, b.end_col_offset)



def before_or_at(a: ast.AST, b: ast.AST) -> bool:
    return position(a) <= position(b)



def between(node: ast.AST, first: ast.AST, last: ast.AST, inclusive_end: bool = False) -> bool:
    here = position(node)
    return after(node, first) and (here <= position(last) if inclusive_end else here < position(last))


def discriminator_generator_pairs(
    ctx: FileContext, scope: Scope, calls: list[BackwardCall]
) -> Iterator[tuple[BackwardCall, BackwardCall]]:
    """(discriminator backward, generator backward) candidates: the second runs after the first in
    the same pass, in the same loop, or after the loop of discriminator steps around the first."""
    later = same_pass_later(ctx, scope, [ctx.statement_of(c.node) for c in calls], allow_first_loop=True)  # the only ones to ask
    for index, first in ((i, c) for i, c in enumerate(calls) if c.keyword("create_graph") is None):
        for second in (calls[i] for i in later[index]):
            one, two = ctx.statement_of(first.node), ctx.statement_of(second.node)
            loop = innermost_loop(ctx, two, scope.node)
            if innermost_loop(ctx, one, scope.node) is loop and runs_after_in_same_pass(ctx, scope, one, two):
                yield first, second
            elif (loop is None or any(p is loop for p in ctx.ancestors(one))) and runs_after_in_same_pass(ctx, scope, one, two, allow_first_loop=True):
                yield first, second  # discriminator steps in a loop of their own (n_critic), then the generator step


# -- backward events, in a scope or in the helpers it calls -----------------------------------
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
        for node in scope_nodes(scope):
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
    """Names of the file's functions and methods whose text calls backward (the cheap gate: text
    only, no walk; ``def backward(`` of an autograd Function does not count)."""

    def compute() -> frozenset[str]:
        found = set()
        for scope in scopes(ctx):
            if not isinstance(scope.node, ast.Module):
                text = _text(ctx, scope.node)
                if text.count("backward(") > text.count("def backward("):
                    found.add(scope.node.name)
        return frozenset(found)

    return ctx.memo("gan_backward_helpers", compute)


def _mentions_call(ctx: FileContext, scope: Scope, names: frozenset[str]) -> bool:
    """The scope's text calls one of ``names`` as a plain function or as a method of ``self``."""

    def compile_pattern() -> re.Pattern:
        alternatives = "|".join(map(re.escape, sorted(names)))
        return re.compile(rf"(?:(?<![.\w])|\bself\.)(?:{alternatives})\s*\(")

    pattern = ctx.memo("gan_helper_call_pattern", compile_pattern)
    if isinstance(scope.node, ast.Module):
        statements = [n for n in scope.node.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        return any(pattern.search(_text(ctx, n)) for n in statements)
    return pattern.search(_text(ctx, scope.node)) is not None


def _text(ctx: FileContext, node: ast.AST) -> str:
    start, end = ctx.span(node)
    return ctx.source[start:end]


def _helper_events(ctx: FileContext, scope: Scope, call: ast.Call, helper: Scope) -> list[Event]:
    names = _argument_names(scope, call, helper)
    if names is None:
        return []
    stmt = ctx.statement_of(call)
    events = []
    for inner in _helper_backwards(ctx, helper):
        uses = []
        for mapped in inner.uses:
            callee = _translate(mapped.callee, names)
            keys = frozenset(k for k in (_translate(key, names) for key in mapped.keys) if k is not None)
            if callee is not None and keys:
                uses.append(MappedUse(mapped.use, helper, callee, keys))
        step = _translate(inner.step, names) if inner.step else None
        if uses:
            events.append(Event(stmt, inner.backward, helper, uses, step))
    return events


def _helper_backwards(ctx: FileContext, helper: Scope) -> list[Event]:
    """Backward calls that always run in the helper, with the uses reaching them named by the
    helper's inputs (its parameters and ``self`` attributes it does not assign)."""

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
                    keys = _inputs(ctx, helper, graph, use.arg, use.stmt, 3)
                    if keys:
                        uses.append(MappedUse(use, helper, use.callee, frozenset(keys)))
            if not uses:
                continue
            steps = optimizer_steps(ctx, helper) if "step(" in _text(ctx, helper.node) else []
            step = next((s.owner for s in steps if after(s.node, stmt) and ctx.parent(ctx.statement_of(s.node)) is helper.node), None)
            found.append(Event(stmt, call, None, uses, step))
        return found

    return ctx.memo(("gan_helper_backwards", id(helper.node)), compute)


def _inputs(ctx: FileContext, helper: Scope, graph: GraphFacts, expr: ast.expr, at: ast.AST, depth: int) -> set[str]:
    """The helper's inputs ``expr`` derives from through graph-carrying flow; empty when some
    name it derives from is neither an input nor assigned once."""
    params = _params(helper)
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


def _flowing_dotted(ctx: FileContext, expr: ast.expr) -> list[ast.expr]:
    from fixer.analysis.shared_graph import flowing_nodes

    return [n for n in flowing_nodes(ctx, expr) if isinstance(n, (ast.Name, ast.Attribute)) and dotted(n)]


def _params(helper: Scope, keyword_only: bool = True) -> list[str]:
    args = helper.node.args
    params = [a.arg for a in args.posonlyargs + args.args]
    params = params[1:] if helper.class_node is not None and params else params
    return params + [a.arg for a in args.kwonlyargs] if keyword_only else params


def _argument_names(scope: Scope, call: ast.Call, helper: Scope) -> Optional[dict[str, Optional[str]]]:
    """How the helper's names read in the caller: parameter -> argument key, ``self`` -> the
    caller's self (same class only). None when the call cannot be matched to the parameters."""
    nodes = _argument_nodes(call, helper)
    if nodes is None:
        return None
    names: dict[str, Optional[str]] = {param: use_key(nodes[param]) if param in nodes else None for param in _params(helper)}
    if helper.self_name is not None:
        if scope.class_node is not helper.class_node or scope.self_name is None:
            return None
        names[helper.self_name] = scope.self_name
    return names


def _translate(name: str, names: dict[str, Optional[str]]) -> Optional[str]:
    head, dot, rest = name.partition(".")
    if head in names:
        base = names[head]
        return None if base is None else base + dot + rest
    return name  # a global: the same name in the caller
