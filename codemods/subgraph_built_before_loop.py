"""## What it does
Finds a tensor computed once before a loop from tensors that require grad (`y = t @ a` with `t`,
`a` leaves with `requires_grad=True` or parameters, `h = encoder(x)`), which every iteration's
loss is built from and backpropagated through.

## Why is this bad?
The graph of `y` is built once and shared by every iteration's graph. The first `backward()`
frees its saved tensors, so the second iteration raises "Trying to backward through the graph a
second time". When an optimizer updates the leaves of `y` in the loop, `y` would also be stale:
it holds the values of the leaves before the first update, so the loss never sees the update.
Only ops that save tensors make this fail (`@`, `*`, `/`, `**`, nonlinearities, module calls);
`y = a + b`, sums, views and indexing save nothing, can be backpropagated again and are not
reported. Uses under `.detach()` do not count, and a loop of discriminator steps on a generator
output built before it is left to GF103 (the fix there is `fake.detach()`, not a recompute).

"Before the loop" includes the last pass of an earlier loop of the same block (`fake = netG(z)`
in the critic steps, then every generator step backpropagates `netD(fake)` and steps the
generator): the value is built once and then reused by every iteration; its copy at the top of
the loop reads the same inputs when nothing rebinds them after it.

The loop's backward may run under a periodic guard (`if step % k == 0:`, many passes) or in a
step function it calls (`loss = train_step(y)`, a function of
this file or of another project file that backpropagates on every call, or on every k-th call
under `if step % k == 0:` when the loop passes its counter and runs more than k passes). A graph built once in
`__init__` (`self.gram = self.factor @ self.factor.t()`) and backpropagated through by a method
that this file calls in a loop fails the same way on the method's second call, and so does a
graph built once by the module or a function and given to the constructor of an object that
keeps it (`Trainer(data)` storing `self.data = data`), wherever that one construction sits (in an
epoch loop, every object gets the same graph).

## Example
```python
y = t @ a
for _ in range(2):
    loss = measure(t @ (x + y), x)
    loss.backward()
```

## Use instead
Recompute `y` in the loop, right before its first use:
```python
for _ in range(2):
    y = t @ a
    loss = measure(t @ (x + y), x)
    loss.backward()
```
The assignment is moved (copied when `y` is also used outside the loop). It is recomputed when
it is a plain expression of tensor ops on names the loop does not rebind, or when it calls
modules, or project functions (of this file or imported) that only return an expression of
tensor ops and calls of their parameters (`return criterion(out, y)`), and the loop updates its
leaves (an optimizer step or an in-place update). Otherwise the
loop's `backward()` gets `retain_graph=True`, which keeps the shared graph alive and gives the
same gradients. `y.detach()` is never the fix: it stops the gradient to `t` and `a`
(`a.grad` stays None).

## Fix safety
Recomputing a plain tensor expression is safe: without updates of its leaves the values and all
gradients equal those of `retain_graph=True`; with updates every iteration uses the current
leaves, which is what the loop means. Recomputing an `__init__` value at the start of the method
is unsafe for the same reasons (it reads only `self` and imported names; otherwise there is no fix).
Recomputing an expression with module or helper calls is unsafe:
dropout draws a new mask every iteration (the random stream shifts) and batch norm updates its
running statistics every iteration. `retain_graph=True` is unsafe: gradients are unchanged, but
every iteration's graph is kept alive until the next one replaces it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Iterator, Optional

from fixer.analysis.built_before_loop import body_nodes, built_before, recompute_kind, saving_from_trainable, updates_leaves
from fixer.analysis.calls import BackwardCall, backward_call, backward_calls
from fixer.analysis.bindings import imported_names
from fixer.analysis.graph import Kind, facts
from fixer.analysis.statement_moves import is_docstring
from fixer.analysis.graph_reuse import derived_names, frees_graph, innermost_loop, inside, reaches, repeats_per_iteration
from fixer.analysis.passes import is_pass_filter
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.analysis.init_graphs import given_graphs, init_graphs
from fixer.edits.keywords import keyword_edit, remove_keyword
from fixer.analysis.training_calls import training_calls
from fixer.analysis.undetached_fakes import undetached_fake_lines
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.rule import Applicability, Diagnostic, Edit, Rule


@dataclass
class Finding:
    name: str
    stmt: ast.Assign
    loop: ast.AST
    calls: list[BackwardCall] = field(default_factory=list)
    band_aid: bool = False  # the loop's backward already passes retain_graph=True


class SubgraphBuiltBeforeLoop(Rule):
    code = "GF102"
    name = "subgraph-built-before-loop"
    summary = "A graph built once before a loop is backpropagated through in every iteration"
    fix_safety = "mixed"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in scopes(ctx):
            for finding in self._findings(ctx, scope):
                if not _gan_step_in(ctx, finding.loop):
                    yield self._report(ctx, scope, finding)
            for name, stmt, _ in init_graphs(ctx, scope, saving_from_trainable):
                method = scope.node.name
                message = (
                    f"`{name} = {ctx.text(stmt.value)}` is built once in `__init__` and backpropagated through by "
                    f"every call of `{method}`: the first call's backward frees its graph, the second fails"
                )
                edits = _recompute_in_method(ctx, scope, stmt)
                if not edits:
                    yield self.diagnostic(ctx, stmt, f"{message}; compute it in `{method}` (keep only its inputs on `self`)")
                    continue
                yield self.diagnostic(ctx, stmt, f"{message}; recompute it at the start of `{method}`", edits,
                                      Applicability.UNSAFE, title=f"Recompute `{name}` in `{method}`")

            for name, stmt, _ in given_graphs(ctx, scope, saving_from_trainable):
                method, cls = scope.node.name, scope.class_node.name
                message = (
                    f"`{ctx.text(stmt)}` is built once, kept by `{cls}` as `{name}` and backpropagated through by "
                    f"every call of `{method}`: the first call's backward frees its graph, the second fails"
                )
                edits = _recompute_given(ctx, scope, name, stmt)
                if not edits:
                    yield self.diagnostic(ctx, stmt, f"{message}; compute it in `{method}`")
                    continue
                yield self.diagnostic(ctx, stmt, f"{message}; recompute it at the start of `{method}`", edits,
                                      Applicability.UNSAFE, title=f"Recompute `{name}` in `{method}`")

    def _findings(self, ctx: FileContext, scope: Scope) -> list[Finding]:
        calls = backward_calls(ctx, scope) + training_calls(ctx, scope)
        if not calls:
            return []
        graph = facts(ctx, scope)
        found: dict[tuple[int, int], Finding] = {}
        for call in calls:
            loop = innermost_loop(ctx, call.node, scope.node)
            if loop is None or not repeats_per_iteration(ctx, call, loop):
                continue
            band_aid = call.flag("retain_graph") is True and call.keyword("create_graph") is None
            if not (frees_graph(call) or band_aid):
                continue
            body = body_nodes(ctx, loop)
            for name, stmt in built_before(ctx, scope, graph, loop, body):
                if reaches(call, derived_names(ctx, graph, {name}, body)):
                    finding = found.setdefault((id(stmt), id(loop)), Finding(name, stmt, loop))
                    finding.calls.append(call)
                    finding.band_aid |= band_aid
        # retain_graph=True keeps the shared graph: wrong only when the loop updates its leaves
        # (stale values, or "modified by an inplace operation"), and then recomputing is the fix
        return [
            f for f in found.values()
            if not f.band_aid or (updates_leaves(ctx, graph, scope, f.stmt.value, f.loop)
                                  and recompute_kind(ctx, graph, scope, f.stmt, f.loop) is not None)
        ]

    def _report(self, ctx: FileContext, scope: Scope, finding: Finding) -> Diagnostic:
        graph = facts(ctx, scope)
        name, stmt, loop = finding.name, finding.stmt, finding.loop
        expression = ctx.text(stmt.value)
        message = (
            f"`{name} = {expression}` is built once before the loop and backpropagated through in every "
            f"iteration: the first backward frees its graph, the second fails"
        )
        recompute = recompute_kind(ctx, graph, scope, stmt, loop)
        if finding.band_aid:
            message = (f"`{name} = {expression}` is built once before the loop and kept with `retain_graph=True` "
                       f"while the loop updates its inputs: every iteration backpropagates through stale values")
        if recompute is not None:
            edits = _recompute_edits(ctx, scope, finding)
            if edits and finding.band_aid:
                edits += _band_aid_removals(ctx, loop, finding.calls)
            if edits:
                safety = Applicability.SAFE if recompute == "pure" else Applicability.UNSAFE
                return self.diagnostic(ctx, stmt, f"{message}; recompute `{name}` in the loop", edits, safety,
                                       title=f"Recompute `{name}` inside the loop")
        if not updates_leaves(ctx, graph, scope, stmt.value, loop) and all(c.kind != "call" for c in finding.calls):
            edits = [edit for call in finding.calls if (edit := _retain_graph_edit(ctx, call))]
            if len(edits) == len(finding.calls):
                return self.diagnostic(ctx, stmt, f"{message}; keep it with `retain_graph=True`", edits,
                                       Applicability.UNSAFE, title="Pass `retain_graph=True` to the loop's backward")
        return self.diagnostic(ctx, stmt, f"{message}; compute `{name}` inside the loop")


def _recompute_given(ctx: FileContext, scope: Scope, name: str, stmt: ast.Assign) -> list[Edit]:
    """``self.y = t @ a`` at the start of the method when the module-level value reads only names
    the module binds once at its top level (or imports) and the method does not bind. A name
    that is itself a graph built at the top level (``output = model(x)`` behind
    ``loss = criterion(output, y)``) is recomputed first, as a local of the method."""
    own = {n.id for n in scope_nodes(scope) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    args = scope.node.args
    own |= {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} | {a.arg for a in (args.vararg, args.kwarg) if a}
    lines = _recomputed_chain(ctx, stmt, own, set()) if ctx.parent(stmt) is ctx.tree else None
    if lines is None:
        return []
    return _at_method_start(ctx, scope, lines + [f"{name} = {ctx.text(stmt.value)}"])


def _recomputed_chain(ctx: FileContext, stmt: ast.Assign, own: set[str], seen: set[str]) -> Optional[list[str]]:
    """The local assignments that rebuild the top-level graphs ``stmt``'s value reads, in order;
    None when a name it reads is not bound once at the top level (or imported)."""
    module = facts(ctx, scopes(ctx)[0])
    if not ctx.is_own_line(stmt) or stmt.lineno != stmt.end_lineno:
        return None
    lines: list[str] = []
    for node in walk(stmt.value):
        if isinstance(node, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)):
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
        inner = _recomputed_chain(ctx, source, own, seen)
        if inner is None:
            return None
        lines += inner + [f"{node.id} = {ctx.text(value)}"]
    return lines


def _recompute_in_method(ctx: FileContext, scope: Scope, stmt: ast.Assign) -> list[Edit]:
    """Copy ``self.x = <value>`` from ``__init__`` to the start of the method when the value reads
    only ``self`` and imported names (``self.L @ self.L.t()``): the method then builds its own graph
    from the current parameters on every call."""
    init = next(p for p in ctx.ancestors(stmt) if isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)))
    self_name = init.args.args[0].arg if init.args.args else None
    allowed = {self_name} | imported_names(ctx)
    if self_name != scope.self_name or not ctx.is_own_line(stmt) or stmt.lineno != stmt.end_lineno:
        return []
    if any(isinstance(n, ast.Name) and n.id not in allowed for n in walk(stmt.value)):
        return []
    if any(isinstance(n, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)) for n in walk(stmt.value)):
        return []
    return _at_method_start(ctx, scope, ctx.text(stmt))


def _at_method_start(ctx: FileContext, scope: Scope, lines) -> list[Edit]:
    """Insert ``lines`` (one line or a list) before the method's first statement (after its docstring)."""
    body = scope.node.body
    first = body[1] if len(body) > 1 and is_docstring(body[0]) else body[0]
    if not ctx.is_own_line(first):
        return []
    start = ctx.line_start(first.lineno)
    indent = ctx.indent_of(first.lineno)
    text = "".join(f"{indent}{line}{ctx.newline}" for line in ([lines] if isinstance(lines, str) else lines))
    return [Edit(start, start, text)]


def _gan_step_in(ctx: FileContext, loop: ast.AST) -> bool:
    """GF103 names the cause here: the loop's steps are discriminator steps on an undetached fake
    built before it (n_critic steps); recomputing the fake would not help the generator step."""
    lines = undetached_fake_lines(ctx)
    return any(loop.lineno <= line <= loop.end_lineno for line in lines)


def _recompute_edits(ctx: FileContext, scope: Scope, finding: Finding) -> list[Edit]:
    """Insert the assignment before the loop statement holding the first use; delete the original
    when nothing outside the loop reads it."""
    stmt, loop = finding.stmt, finding.loop
    uses = [n for n in body_nodes(ctx, loop) if isinstance(n, ast.Name) and n.id == finding.name and isinstance(n.ctx, ast.Load)]
    target = next((s for s in loop.body if any(u is s or inside(ctx, u, s) for u in uses)), None)
    while is_pass_filter(ctx, target) and not any(inside(ctx, u, target.test) for u in uses):
        target = next((s for s in target.body if any(u is s or inside(ctx, u, s) for u in uses)), None)  # into the selected passes
    if target is None or target.lineno == loop.lineno or not ctx.is_own_line(target) or not ctx.is_own_line(stmt):
        return []
    old, new = ctx.indent_of(stmt.lineno), ctx.indent_of(target.lineno)
    lines = ctx.lines[stmt.lineno - 1 : stmt.end_lineno]
    text = "".join(new + line[len(old):] if line.startswith(old) else line for line in lines)
    if not text.endswith(("\n", "\r")):
        text += ctx.newline
    edits = [Edit(ctx.line_start(target.lineno), ctx.line_start(target.lineno), text)]
    elsewhere = [
        n for n in scope_nodes(scope)
        if isinstance(n, ast.Name) and n.id == finding.name and isinstance(n.ctx, ast.Load) and not inside(ctx, n, loop)
    ]
    siblings = getattr(ctx.parent(stmt), "body", [])
    if not elsewhere and stmt in siblings and len(siblings) > 1 and inside(ctx, loop, ctx.parent(stmt)):  # else copied
        edits.append(Edit(ctx.line_start(stmt.lineno), ctx.line_end(stmt.end_lineno), ""))
    return edits


def _band_aid_removals(ctx: FileContext, loop: ast.AST, calls: list[BackwardCall]) -> list[Edit]:
    """Drop ``retain_graph=True`` when the call is the loop's only backward: once the value is
    recomputed, nothing else needs the graph kept."""
    loop_calls = [n for n in body_nodes(ctx, loop) if isinstance(n, ast.Call) and backward_call(ctx, n)]
    if len(loop_calls) != 1:
        return []
    return [remove_keyword(ctx, call.node, "retain_graph") for call in calls if call.flag("retain_graph") is True]


def _retain_graph_edit(ctx: FileContext, call: BackwardCall) -> Optional[Edit]:
    if call.keyword("retain_graph") is not None:
        return None  # retain_graph=False written out: the author decided
    return keyword_edit(ctx, call.node, "retain_graph")
