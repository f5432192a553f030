"""Where gradients are backpropagated again: the later backward whose target derives from the
result of a ``torch.autograd.grad`` call (``grad_consumer``), or from an ``x.grad`` that an earlier
``loss.backward()`` wrote and a penalty reduces (``penalty_reads``). The gradients are followed
through assignments, loops over them, containers they are appended to, and the functions and
methods that return them (to every call site of the project's one caller answer); a comprehension
whose elements leave detached, ``torch.no_grad()`` and a new gradient chain taken with respect to
them end the flow. Code that names a first-order variant (``first_order``, FOMAML, Reptile) asks
for constant gradients on purpose, and so does a step that moves a fresh input leaf along its own
gradient (an attack or a sampling step)."""

from __future__ import annotations

import ast
import re
from typing import Iterator, NamedTuple, Optional

from fixer.analysis.calls import BackwardCall, backward_calls
from fixer.analysis.graph import facts
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.names import dotted, qualified
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.scopes import Scope, scope_nodes
from fixer.analysis.shared_graph import flowing_nodes
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.analysis.vocabulary import SEQUENCE_ADDS

MAX_DEPTH = 2  # caller levels followed from a helper that returns the gradients
PENALTY = re.compile(r"\.(norm|pow|square|sum|mean|abs)\(|\*\*\s*2|torch\.(norm|sum|mean|square)\(")
FIRST_ORDER = re.compile(r"first[_ -]?order|fomaml|reptile", re.IGNORECASE)
FIRST_ORDER_LOWERED = re.compile(r"first[_ -]?order")  # its first part, in a lowered ASCII text


class Consumer(NamedTuple):
    ctx: FileContext  # the file of the backward call (a caller's, for a helper of another file)
    call: BackwardCall


_RETURNED = Consumer(None, None)  # the flow reached a return of the scope (asked with RETURN_ONLY)
RETURN_ONLY = -1  # a depth: stop at the scope's returns instead of following its callers


def wants_first_order(ctx: FileContext, scope: Scope) -> bool:
    return _may_say_first_order(ctx) and ctx.mentions(scope.node, FIRST_ORDER)


def _may_say_first_order(ctx: FileContext) -> bool:
    """An ASCII text holds a word of FIRST_ORDER, in any case: found in the lowered text (the same
    offsets) at ``str.find`` speed before the case-insensitive regex, 20 times slower, is tried at
    all; ``first`` alone is a common word, so its ``order`` is looked for after it."""
    def compute() -> bool:
        if not ctx.source.isascii():
            return True
        lowered = ctx.source.lower()
        return "fomaml" in lowered or "reptile" in lowered or "first" in lowered and FIRST_ORDER_LOWERED.search(lowered) is not None

    return ctx.memo("may_say_first_order", compute)


def grad_consumer(ctx: FileContext, scope: Scope, call: BackwardCall) -> Optional[Consumer]:
    """The backward that backpropagates the result of the ``autograd.grad`` call ``call`` made
    without ``create_graph``; None when nothing does or the constant gradients are intended."""
    if wants_first_order(ctx, scope) or under_no_grad(ctx, call.node) or _steps_a_fresh_input(ctx, scope, call):
        return None
    return _consumer(ctx, scope, call.node)


def helper_consumer(ctx: FileContext, scope: Scope, call: ast.Call) -> Optional[Consumer]:
    """The backward that backpropagates what ``call`` (of a helper that returns gradients)
    returns; None when nothing does or the constant gradients are intended."""
    if wants_first_order(ctx, scope) or under_no_grad(ctx, call):
        return None
    found = _consumer(ctx, scope, call)
    return None if found is _RETURNED else found


def returns_gradients(ctx: FileContext, scope: Scope, source: ast.expr) -> bool:
    """What ``source`` computes in ``scope`` (an autograd.grad call, or a call of a helper that
    returns gradients) flows into a value ``scope`` returns."""
    return _consumer(ctx, scope, source, RETURN_ONLY) is _RETURNED


def penalty_reads(ctx: FileContext, scope: Scope) -> Iterator[tuple[BackwardCall, Consumer]]:
    """``loss.backward()`` without ``create_graph``, then a penalty built from ``x.grad``
    (``x.grad.pow(2).sum()``, ``x`` an input of the graph that backward walks) that a later
    backward backpropagates: double backpropagation. One (backward, consumer) per backward."""
    calls = [c for c in backward_calls(ctx, scope) if c.kind != "owner"]
    if len(calls) < 2 or wants_first_order(ctx, scope):
        return
    reported: set[int] = set()
    for node in scope_nodes(scope):
        if not _grad_of_a_value(ctx, node):
            continue
        previous = [c for c in calls if _before(c.node, node)]
        backward = previous[-1] if previous else None
        if backward is None or backward.kind == "autograd.grad" or id(backward.node) in reported:
            continue
        if not _reaches(ctx, scope, backward, dotted(node.value)):
            continue  # the owner is no leaf this backward writes a gradient to
        if backward.keyword("create_graph") is not None or under_no_grad(ctx, node) or not _penalty_shaped(ctx, node):
            continue
        stmt = ctx.statement_of(node)
        consumer = _follow(ctx, scope, stmt, node, _targets(stmt), 0)
        if consumer is not None and consumer.call.node is not backward.node:
            reported.add(id(backward.node))
            yield backward, consumer


def _consumer(ctx: FileContext, scope: Scope, source: ast.expr, depth: int = 0) -> Optional[Consumer]:
    """The first later backward call whose target derives from the value of ``source`` (the
    autograd.grad call, or a call of a helper function that returns what derives from it)."""
    stmt = ctx.statement_of(source)
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)) else None
    if value is None or not any(node is source for node in flowing_nodes(ctx, value)) or _iterated_detached(ctx, source):
        return None  # detached on the spot, or used in a compound statement's header
    if isinstance(stmt, ast.Return):
        return _returned(ctx, scope, depth)
    for later in backward_calls(ctx, scope):
        if later.node is not source and not _before(later.node, source) and any(node is source for node in flowing_nodes(ctx, later.target)):
            return Consumer(ctx, later)  # (... autograd.grad(...) ...).backward()
    derived: set[str] = _collected_into(stmt) if isinstance(stmt, ast.Expr) else _targets(stmt)
    return _follow(ctx, scope, stmt, source, derived, depth)


def _follow(ctx: FileContext, scope: Scope, stmt: ast.stmt, source: ast.expr, derived: set[str], depth: int) -> Optional[Consumer]:
    """The first backward after ``stmt`` whose target derives from the names in ``derived``."""
    consumers = {id(c.node): c for c in backward_calls(ctx, scope) if c.node is not source and _before(source, c.node)}
    for node in (n for n in scope_nodes(scope) if isinstance(n, ast.stmt) and _before(stmt, n)):
        for backward in _backward_calls_in(node, consumers):
            if _flows(ctx, backward.target, derived) and not _new_chain(ctx, backward, derived):
                return Consumer(ctx, backward)
        if isinstance(node, ast.Return) and node.value is not None and _flows(ctx, node.value, derived):
            return _returned(ctx, scope, depth)
        if under_no_grad(ctx, node):
            continue
        if isinstance(node, ast.Expr) and _collects(ctx, node, derived):
            derived |= _collected_into(node)  # grads.append(env_grad): the list holds them now
            continue
        value = _assigned_value(node)
        if value is None:
            continue
        names = _targets(node)
        if _flows(ctx, value, derived):
            derived |= names
        elif not isinstance(node, ast.AugAssign):
            derived -= names
    return None


def _returned(ctx: FileContext, scope: Scope, depth: int) -> Optional[Consumer]:
    return _RETURNED if depth == RETURN_ONLY else _through_callers(ctx, scope, depth)


def _through_callers(ctx: FileContext, helper: Scope, depth: int) -> Optional[Consumer]:
    """A helper returns the derived value: follow it from each of its call sites, in this file
    and in the project files that import it."""
    if depth >= MAX_DEPTH or isinstance(helper.node, ast.Module):
        return None
    for caller_ctx, caller, call in project_call_sites(ctx, helper):
        if call is None or caller_ctx is not ctx and wants_first_order(caller_ctx, caller):
            continue
        found = _consumer(caller_ctx, caller, call, depth + 1)
        if found is not None:
            return found
    return None


def _new_chain(ctx: FileContext, call: BackwardCall, derived: set[str]) -> bool:
    """``autograd.grad(loss, fast)`` taken with respect to tensors derived from the gradients
    (fast weights): it never walks into the first gradients' graph; its own result is followed on
    as gradients (the assignment flows from ``loss``) to whatever backpropagates further."""
    if call.kind != "autograd.grad":
        return False
    inputs = _inputs(call.node)
    return inputs is not None and _flows(ctx, inputs, derived)


def _inputs(call: ast.Call) -> Optional[ast.expr]:
    return call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "inputs"), None)


def _grad_of_a_value(ctx: FileContext, node: ast.AST) -> bool:
    """``node`` reads the ``.grad`` of a named value: not a callee (``torch.autograd.grad(...)``)
    nor any name that resolves to a module's attribute."""
    if not (isinstance(node, ast.Attribute) and node.attr == "grad" and isinstance(node.ctx, ast.Load)):
        return False
    parent = ctx.parent(node)
    if isinstance(parent, ast.Call) and parent.func is node:
        return False
    return dotted(node.value) is not None and not (qualified(ctx, node) or "").startswith("torch.")


def _reaches(ctx: FileContext, scope: Scope, backward: BackwardCall, owner: Optional[str]) -> bool:
    """``owner`` is an input of the graph ``backward`` walks: the target derives from it through
    the scope's assignments (the backward writes ``owner.grad``)."""
    graph = facts(ctx, scope)
    seen: set[tuple[str, int]] = set()
    pending = [(backward.target, backward.node)]
    while pending and owner:
        expr, at = pending.pop()
        for node in flowing_nodes(ctx, expr):
            name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if name is None or (name, id(at)) in seen:
                continue
            if name == owner:
                return True
            seen.add((name, id(at)))
            pending += [(value, stmt) for stmt, value in graph.reaching(name, at) if value is not None]
    return False


def _penalty_shaped(ctx: FileContext, read: ast.Attribute) -> bool:
    """The statement reading ``x.grad`` reduces it to a penalty (a norm, square, sum or mean) and
    does not combine it with ``x`` itself (``x + eps * x.grad.sign()`` is an attack step)."""
    stmt = ctx.statement_of(read)
    if not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)) or stmt.value is None:
        return False
    owner = dotted(read.value)
    uses_owner = any(
        isinstance(n, (ast.Name, ast.Attribute)) and dotted(n) == owner and not (isinstance(ctx.parent(n), ast.Attribute) and ctx.parent(n).attr == "grad")
        for n in walk(stmt.value)
    )
    return not uses_owner and bool(PENALTY.search(ctx.text(stmt.value)))


def _steps_a_fresh_input(ctx: FileContext, scope: Scope, call: BackwardCall) -> bool:
    """``x_adv = x_adv + alpha * grad`` where ``x_adv``, the tensor differentiated against, was made
    a fresh leaf (``x.clone().requires_grad_()``, ``torch.zeros_like(x, requires_grad=True)``): a
    PGD attack or a sampling step moves that input, and the outer loss uses the result as data."""
    inputs = _inputs(call.node)
    if isinstance(inputs, (ast.List, ast.Tuple)) and len(inputs.elts) == 1:
        inputs = inputs.elts[0]
    if not isinstance(inputs, ast.Name):
        return False
    assigns = [
        node for node in scope_nodes(scope)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id == inputs.id
    ]
    if not any(_before(a, call.node) and _is_fresh_leaf(a.value) for a in assigns):
        return False
    gradients = _targets(ctx.statement_of(call.node))
    return any(_before(call.node, a) and _flows(ctx, a.value, gradients) for a in assigns)


def _is_fresh_leaf(value: ast.expr) -> bool:
    if not isinstance(value, ast.Call):
        return False
    if isinstance(value.func, ast.Attribute) and value.func.attr == "requires_grad_":
        return True
    return any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True for k in value.keywords)


def _backward_calls_in(stmt: ast.stmt, consumers: dict[int, BackwardCall]) -> list[BackwardCall]:
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.Try)):
        return []  # compound statements: their inner statements are visited on their own
    return [consumers[id(n)] for n in walk(stmt) if id(n) in consumers]


def _collected_into(stmt: ast.Expr) -> set[str]:
    """``grads.append(autograd.grad(...))``: the list that now holds the gradients."""
    call = stmt.value
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in SEQUENCE_ADDS:
        name = dotted(call.func.value)
        return {name} if name else set()
    return set()


def _collects(ctx: FileContext, stmt: ast.Expr, derived: set[str]) -> bool:
    """``container.append(value)`` (or ``extend``, ``insert``) with a value derived from the gradients."""
    call = stmt.value
    return (
        isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in SEQUENCE_ADDS
        and any(_flows(ctx, arg, derived) for arg in call.args)
    )


def _assigned_value(stmt: ast.stmt) -> Optional[ast.expr]:
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return stmt.value
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return stmt.iter
    return None


def _targets(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [stmt.target]
    else:
        return set()
    return {name for target in targets for node in walk(target) if isinstance(node, (ast.Name, ast.Attribute)) and (name := dotted(node))}


def _flows(ctx: FileContext, expr: ast.expr, derived: set[str]) -> bool:
    return bool(derived) and any(
        isinstance(node, (ast.Name, ast.Attribute)) and dotted(node) in derived and not _iterated_detached(ctx, node)
        for node in flowing_nodes(ctx, expr)
    )


def _iterated_detached(ctx: FileContext, node: ast.expr) -> bool:
    """``node`` is what a comprehension iterates over, and its elements leave detached:
    ``[g.detach().clone() for g in grads]`` carries none of ``grads``' graph."""
    generator = ctx.parent(node)
    if not isinstance(generator, ast.comprehension) or generator.iter is not node:
        return False
    comprehension = ctx.parent(generator)
    elements = [getattr(comprehension, field) for field in ("elt", "key", "value") if getattr(comprehension, field, None) is not None]
    names = {n.id for g in getattr(comprehension, "generators", ()) for n in walk(g.target) if isinstance(n, ast.Name)}
    return bool(elements) and not any(
        isinstance(n, ast.Name) and n.id in names for element in elements for n in flowing_nodes(ctx, element)
    )


def _before(a: ast.AST, b: ast.AST) -> bool:
    return (a.lineno, a.col_offset) < (b.lineno, b.col_offset)
