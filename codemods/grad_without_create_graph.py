"""## What it does
Finds `torch.autograd.grad(...)` called without `create_graph=True` whose result then flows into
a loss that is backpropagated, or into another `torch.autograd.grad`: a gradient penalty
(WGAN-GP, R1, input-gradient regularisation), the inner step of second-order MAML, a
Hessian-vector product. Also `loss.backward()` without `create_graph=True` whose `x.grad` is
reduced to a penalty (`x.grad.pow(2).sum()`) that a later backward backpropagates (double
backpropagation), when `x` is a value (never the callee `torch.autograd.grad`) and an input of
the graph that backward walks. The gradients are followed through assignments, loops over them,
lists they are appended to, and helper functions or methods (`self.net_f(x)`) that return them;
a comprehension whose elements are detached (`[g.detach() for g in grads]`) ends the flow.
A later `autograd.grad(loss, fast_weights)` taken with respect to tensors derived from the
gradients starts a new gradient chain: it is followed on to the backward that reaches the
original leaves (MAML's meta-backward), and nothing is reported when none does (test-time
fine-tuning).

## Why is this bad?
Without `create_graph=True` the returned gradients are plain constants: no graph records how they
depend on the parameters. A penalty built from them contributes nothing to the outer gradient
(the regulariser silently does nothing), MAML's meta-gradient loses its second-order term, and
when nothing else in the outer loss requires grad the outer backward raises `element 0 of tensors
does not require grad and does not have a grad_fn`. `retain_graph=True` only keeps the first
graph alive; it does not make the gradients differentiable.

## Example
```python
grads = torch.autograd.grad(critic(mixed).sum(), mixed, retain_graph=True)[0]
penalty = ((grads.norm(2, dim=1) - 1) ** 2).mean()
(critic_loss + 10 * penalty).backward()
```

## Use instead
```python
grads = torch.autograd.grad(critic(mixed).sum(), mixed, create_graph=True)[0]
```
`create_graph=True` implies `retain_graph=True`, so it replaces a constant `retain_graph=True`.

Left alone: `create_graph` given in any form (`create_graph=False` or `create_graph=not
first_order` is a deliberate first-order choice), code that mentions first-order variants
(`first_order`, FOMAML, Reptile), gradients that only feed logging, norms or clipping, pass
through `.detach()`, `.item()`, `.sign()` (adversarial steps), updates under `torch.no_grad()`,
and steps that move the very input they differentiate against when it was made a fresh leaf
(`x_adv = x_adv + alpha * grad` after `x_adv = x.clone().requires_grad_()`: an L2 PGD attack or
a Langevin sampling step); an `x.grad` read combined with `x` itself (`x + eps * x.grad`).

## Fix safety
Unsafe: the gradients change, which is the point. The outer backward now includes the derivative
of the penalty or of the inner update (the second-order term); parameters reached through the
inner gradients receive different (correct) gradients, and memory and time grow by a second
backward graph.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Iterator, NamedTuple, Optional

from fixer.analysis.calls import BackwardCall, backward_calls
from fixer.analysis.graph import facts
from fixer.analysis.importers import importer_calls
from fixer.analysis.names import dotted, qualified
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.analysis.shared_graph import flowing_nodes
from fixer.context import FileContext
from fixer.edits.keywords import keyword_edit
from fixer.nodes import walk
from fixer.rule import Applicability, Diagnostic, Edit, Rule

MAX_DEPTH = 2
COLLECTING_METHODS = ("append", "extend", "insert")
PENALTY = re.compile(r"\.(norm|pow|square|sum|mean|abs)\(|\*\*\s*2|torch\.(norm|sum|mean|square)\(")
FIRST_ORDER = re.compile(r"first[_ -]?order|fomaml|reptile", re.IGNORECASE)


class GradWithoutCreateGraph(Rule):
    code = "GF107"
    name = "grad-without-create-graph"
    summary = "autograd.grad results used in a backpropagated loss need create_graph=True"
    fix_safety = "unsafe"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in scopes(ctx):
            for call in backward_calls(ctx, scope):
                if call.kind != "autograd.grad" or call.keyword("create_graph") is not None:
                    continue
                if ctx.mentions(scope.node, FIRST_ORDER) or under_no_grad(ctx, call.node):
                    continue
                if _steps_a_fresh_input(ctx, scope, call):
                    continue  # an attack or sampling step in input space: its result is data
                consumer = _consumer(ctx, scope, call.node)
                if consumer is not None:
                    yield self._report(ctx, call, consumer)
            yield from self._check_grad_reads(ctx, scope)

    def _check_grad_reads(self, ctx: FileContext, scope: Scope) -> Iterator[Diagnostic]:
        """``loss.backward()`` then a penalty built from ``x.grad`` (``x.grad.pow(2).sum()``) that a
        later backward backpropagates: double backpropagation that needs ``create_graph=True``."""
        calls = [c for c in backward_calls(ctx, scope) if c.kind != "owner"]
        if len(calls) < 2 or ctx.mentions(scope.node, FIRST_ORDER):
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
            if backward.keyword("create_graph") is not None or under_no_grad(ctx, node):
                continue
            if not _penalty_shaped(ctx, node):
                continue
            stmt = ctx.statement_of(node)
            consumer = _follow(ctx, scope, stmt, node, _targets(stmt), 0)
            if consumer is not None and consumer.call.node is not backward.node:
                reported.add(id(backward.node))
                yield self._report(ctx, backward, consumer)

    def _report(self, ctx: FileContext, call: BackwardCall, consumer: "Consumer") -> Diagnostic:
        retain = call.keyword("retain_graph")
        if retain is None:
            edits = [keyword_edit(ctx, call.node, "create_graph")]
        elif isinstance(retain.value, ast.Constant) and retain.value.value is True:
            start, end = ctx.span(retain)
            edits = [Edit(start, end, "create_graph=True")]
        else:
            edits = []  # retain_graph=False or an expression: the user decides
        return self.diagnostic(
            ctx,
            call.node,
            f"the gradients {'of this autograd.grad' if call.kind == 'autograd.grad' else 'this backward writes to .grad'} "
            f"reach `{consumer.ctx.text(consumer.call.target)}`, backpropagated on line "
            f"{consumer.call.node.lineno}{_elsewhere(ctx, consumer)}, but without create_graph=True they are constants: the outer gradient misses "
            f"their derivative (the penalty or second-order term). Pass create_graph=True",
            edits,
            Applicability.UNSAFE,
            title="Pass create_graph=True",
        )


class Consumer(NamedTuple):
    ctx: FileContext  # the file of the backward call (a caller's, for a helper of another file)
    call: BackwardCall


def _elsewhere(ctx: FileContext, consumer: Consumer) -> str:
    if consumer.ctx is ctx:
        return ""
    return f" of {os.path.relpath(consumer.ctx.path, os.path.dirname(os.path.abspath(ctx.path)))}"


def _consumer(ctx: FileContext, scope: Scope, source: ast.expr, depth: int = 0) -> Optional[Consumer]:
    """The first later backward call whose target derives from the value of ``source`` (the
    autograd.grad call, or a call of a helper function that returns what derives from it)."""
    calls = backward_calls(ctx, scope)
    stmt = ctx.statement_of(source)
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)) else None
    if value is None or not any(node is source for node in flowing_nodes(ctx, value)) or _iterated_detached(ctx, source):
        return None  # detached on the spot, or used in a compound statement's header
    if isinstance(stmt, ast.Return):
        return _through_callers(ctx, scope, depth)
    for later in calls:
        if later.node is not source and not _before(later.node, source) and any(node is source for node in flowing_nodes(ctx, later.target)):
            return Consumer(ctx, later)  # (... autograd.grad(...) ...).backward()
    derived: set[str] = _collected_into(stmt) if isinstance(stmt, ast.Expr) else _targets(stmt)
    return _follow(ctx, scope, stmt, source, derived, depth)


def _follow(ctx: FileContext, scope: Scope, stmt: ast.stmt, source: ast.expr, derived: set[str], depth: int) -> Optional[Consumer]:
    """The first backward after ``stmt`` whose target derives from the names in ``derived``."""
    calls = backward_calls(ctx, scope)
    consumers = {id(c.node): c for c in calls if c.node is not source and _before(source, c.node)}
    for node in (n for n in scope_nodes(scope) if isinstance(n, ast.stmt) and _before(stmt, n)):
        for backward in _backward_calls_in(node, consumers):
            if _flows(ctx, backward.target, derived) and not _new_chain(ctx, backward, derived):
                return Consumer(ctx, backward)
        if isinstance(node, ast.Return) and node.value is not None and _flows(ctx, node.value, derived):
            return _through_callers(ctx, scope, depth)
        if under_no_grad(ctx, node):
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


def _new_chain(ctx: FileContext, call: BackwardCall, derived: set[str]) -> bool:
    """``autograd.grad(loss, fast)`` taken with respect to tensors derived from the gradients
    (fast weights): it never walks into the first gradients' graph; its own result is followed on
    as gradients (the assignment flows from ``loss``) to whatever backpropagates further."""
    if call.kind != "autograd.grad":
        return False
    args = call.node.args
    inputs = args[1] if len(args) > 1 else next((k.value for k in call.node.keywords if k.arg == "inputs"), None)
    return inputs is not None and _flows(ctx, inputs, derived)


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
    inputs = call.node.args[1] if len(call.node.args) > 1 else next((k.value for k in call.node.keywords if k.arg == "inputs"), None)
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


def _through_callers(ctx: FileContext, helper: Scope, depth: int) -> Optional[Consumer]:
    """A helper returns the derived value: follow each call of it in the file (by its name), then
    in the other project files that import it."""
    if depth >= MAX_DEPTH or isinstance(helper.node, ast.Module):
        return None
    for scope in scopes(ctx):
        if helper.class_node is not None and (scope.class_node is not helper.class_node or not scope.self_name):
            continue  # a method: followed through ``self.method(...)`` in its own class
        for node in scope_nodes(scope):
            if isinstance(node, ast.Call) and _calls(node.func, helper, scope):
                found = _consumer(ctx, scope, node, depth + 1)
                if found is not None:
                    return found
    for caller in importer_calls(ctx, helper):
        if caller.call is not None and not caller.ctx.mentions(caller.scope.node, FIRST_ORDER):
            found = _consumer(caller.ctx, caller.scope, caller.call, depth + 1)
            if found is not None:
                return found
    return None


def _calls(func: ast.expr, helper: Scope, caller: Scope) -> bool:
    name = helper.node.name
    if helper.class_node is None:
        return isinstance(func, ast.Name) and func.id == name
    return isinstance(func, ast.Attribute) and func.attr == name and isinstance(func.value, ast.Name) and func.value.id == caller.self_name


def _backward_calls_in(stmt: ast.stmt, consumers: dict[int, BackwardCall]) -> list[BackwardCall]:
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.Try)):
        return []  # compound statements: their inner statements are visited on their own
    return [consumers[id(n)] for n in walk(stmt) if id(n) in consumers]


def _collected_into(stmt: ast.Expr) -> set[str]:
    """``grads.append(autograd.grad(...))``: the list that now holds the gradients."""
    call = stmt.value
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in COLLECTING_METHODS:
        name = dotted(call.func.value)
        return {name} if name else set()
    return set()


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
