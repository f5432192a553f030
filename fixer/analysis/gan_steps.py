"""GAN steps: which callable a tensor is fed to, and which optimizer steps after a backward.

``callable_uses`` lists ``D(fake)``-like applications of a callable to a named tensor, and
``flows_to`` whether one reaches a backward; ``discriminator_generator_pairs`` pairs a
discriminator step with a generator step of the same pass. The backward calls made inside helper
functions or methods of the same file are ``gan_events.py``'s.
"""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass
from typing import Iterator, Optional

from fixer.analysis.calls import BackwardCall, OptimizerCall, backward_calls, optimizer_calls
from fixer.analysis.graph import DETACHING_METHODS, GraphFacts, Kind, facts
from fixer.analysis.graph_reuse import flows_straight, innermost_loop
from fixer.analysis.shared_graph import flowing_nodes, runs_after_in_same_pass, same_pass_later
from fixer.analysis.names import dotted, qualified
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.callees import called_function
from fixer.analysis.class_model import attribute_writes
from fixer.analysis.protocol import optimizer_params
from fixer.analysis.scopes import CALLS, RETURNS, Scope, nodes_of, scope_nodes
from fixer.analysis.slots import slot_name, stable_field
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
    for node in nodes_of(scope, CALLS):
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
            callee = field_alias(ctx, scope, graph, node.func) or slot_name(node.func)
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


def field_alias(ctx: FileContext, scope: Scope, graph: GraphFacts, func: ast.expr) -> Optional[str]:
    """The field a local name stands for: ``netD`` bound once to ``self.netD`` (``netD =
    self.netD``, ``netG, netD = self.netG, self.netD``), a field only ``__init__`` writes, so the
    name calls what the field holds for the object's life. None otherwise."""
    if not isinstance(func, ast.Name) or scope.class_node is None or not scope.self_name:
        return None
    defs = graph.reaching(func.id, func)
    value = defs[0][1] if len(defs) == 1 else None
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Attribute) and dotted(value.value.value) == scope.self_name:
        return slot_name(value) if stable_field(ctx, scope.class_node, value.value.attr) else None  # netD = self.nets["D"]
    if not isinstance(value, ast.Attribute) or dotted(value.value) != scope.self_name:
        return None
    writes = attribute_writes(ctx, scope.class_node).get(value.attr, [])
    return dotted(value) if writes and all(w.method.node.name == "__init__" for w in writes) else None


def _loss_helper_uses(ctx: FileContext, scope: Scope, call: ast.Call, stmt: ast.stmt, depth: int) -> list[Use]:
    """The helper's own uses whose callable and tensor are its parameters and whose result it
    returns, as uses of the caller's arguments at ``call``. A helper that backpropagates or steps
    is a step function (``gan_events.backward_events``), not a loss."""
    helper = called_function(ctx, scope, call.func)
    if helper is None or isinstance(helper.node, ast.Module) or helper.node is scope.node or helper.self_name:
        return []
    own = helper.ctx or ctx
    text = text_of(own, helper.node)
    if "backward" in text or "step(" in text or "yield" in text:
        return []
    names = argument_names(scope, call, helper)
    arguments = argument_nodes(call, helper)
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


def argument_nodes(call: ast.Call, helper: Scope) -> Optional[dict[str, ast.expr]]:
    """Parameter -> the argument expression the call gives it."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    nodes = dict(zip(helper_params(helper, keyword_only=False), call.args))
    nodes.update({k.arg: k.value for k in call.keywords if k.arg in helper_params(helper)})
    return nodes


def _returned(ctx: FileContext, helper: Scope, use: Use) -> bool:
    """The use's result flows into what the helper returns: it sits in a ``return``, or in an
    assignment of a name that a ``return`` reads (directly or through further assignments)."""
    wanted = {use.stmt}
    returns = [n for n in nodes_of(helper, RETURNS) if isinstance(n, ast.Return) and n.value is not None]
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


def gan_backwards(ctx: FileContext, scope: Scope) -> Optional[tuple[list[BackwardCall], list[OptimizerCall]]]:
    """The scope's graph-freeing backward calls and its optimizer steps, when it may hold a GAN's
    discriminator and generator steps: two such calls, and steps of two optimizers."""
    calls = [c for c in backward_calls(ctx, scope) if c.kind in FREEING_KINDS]
    if len(calls) < 2:
        return None
    steps = optimizer_steps(ctx, scope)
    if len({s.owner for s in steps}) < 2:  # one optimizer: no generator and discriminator steps
        return None
    return calls, steps


def text_of(ctx: FileContext, node: ast.AST) -> str:
    start, end = ctx.span(node)
    return ctx.source[start:end]


def helper_params(helper: Scope, keyword_only: bool = True) -> list[str]:
    args = helper.node.args
    params = [a.arg for a in args.posonlyargs + args.args]
    params = params[1:] if helper.class_node is not None and params else params
    return params + [a.arg for a in args.kwonlyargs] if keyword_only else params


def argument_names(scope: Scope, call: ast.Call, helper: Scope) -> Optional[dict[str, Optional[str]]]:
    """How the helper's names read in the caller: parameter -> argument key, ``self`` -> the
    caller's self (same class only). None when the call cannot be matched to the parameters."""
    nodes = argument_nodes(call, helper)
    if nodes is None:
        return None
    names: dict[str, Optional[str]] = {param: use_key(nodes[param]) if param in nodes else None for param in helper_params(helper)}
    if helper.self_name is not None:
        if scope.class_node is not helper.class_node or scope.self_name is None:
            return None
        names[helper.self_name] = scope.self_name
    return names
