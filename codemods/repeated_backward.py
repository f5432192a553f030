"""## What it does
Finds a tensor that is backpropagated a second time: `loss.backward()` twice with no new value of
`loss` between, or an extra `loss.backward()` right after a gradient-accumulation loop that
already backpropagated every micro-batch's `loss` (it walks the last one's graph again); also
`loss = step(batch)` followed by `loss.backward()` where `step` (of this file or another project
file) backpropagates and returns that very loss. It only
fires when the loss certainly saved tensors for backward (it comes from a module, criterion or
an operation such as `*`, `@`, `exp`), since graphs of additions alone (`y = x + 1`) can be
walked twice without error.

## Why is this bad?
The first backward frees the graph's saved tensors, so the second raises `RuntimeError: Trying to
backward through the graph a second time`. Even when it is made to run, it adds the same
gradients again: the parameters receive twice the gradient of that loss.

## Example
```python
computed_loss = criterion(model(inputs), target)
computed_loss.backward()
computed_loss.backward()
```
```python
for offset in range(accumulation_steps):
    loss = criterion(model(batch(offset)), target(offset))
    loss.backward()
loss.backward()  # the last micro-batch again
optimizer.step()
```

## Use instead
For a straight repeat, `retain_graph=True` on every call but the last (what the error message
proposes), if the doubled gradient is really wanted; usually the duplicate call should go:
```python
computed_loss.backward(retain_graph=True)
computed_loss.backward()
```
After an accumulation loop, delete the extra call: the loop already accumulated every
micro-batch's gradients. When an optimizer step runs between the two calls, the later call is a
leftover (`retain_graph=True` would only trade the error for "modified by an inplace
operation", the step having changed saved parameters): the fix deletes it.

Left alone: a loss recomputed between the calls, a first call that already passes
`retain_graph=True`, `create_graph=True` (higher-order gradients), values whose graph may save
nothing, calls in different branches, and calls in loops around them (GF102).

## Fix safety
When the first call is `torch.autograd.grad` (a gradient norm, a penalty computed on the side),
`retain_graph=True` there is safe: autograd.grad returns gradients without accumulating them, so
the later backward computes exactly what it was written to. Otherwise unsafe, and the user decides. `retain_graph=True` makes the program run as written: the repeated
call adds the loss's gradients a second time (they double), which is rarely intended. Deleting
the call after an accumulation loop changes the gradients of the parameters the last micro-batch
reaches: they no longer receive that micro-batch's gradient twice. Deleting a call after a step
leaves `.grad` holding the gradients of the first call only.
"""

from __future__ import annotations

import ast
import re
from typing import Iterator, Optional

from fixer.analysis.calls import BackwardCall, backward_calls, optimizer_calls, training_call_text, training_functions
from fixer.analysis.carried_flow import always_runs
from fixer.analysis.graph import facts
from fixer.analysis.held_values import held_name
from fixer.analysis.names import dotted
from fixer.analysis.callees import called_function
from fixer.analysis.imported_definitions import imported_step_names
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.analysis.shared_graph import (
    backwarded_again_after_loop,
    graph_origins,
    retains_graph,
    runs_after_in_same_pass,
    same_pass_later,
    same_value,
)
from fixer.context import FileContext
from fixer.edits.keywords import keyword_edit
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class RepeatedBackward(Rule):
    code = "GF106"
    name = "repeated-backward"
    summary = "The same tensor is backpropagated again after its graph was freed"
    fix_safety = "mixed"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in scopes(ctx):
            direct = [c for c in backward_calls(ctx, scope) if c.keyword("create_graph") is None]
            helpers = _helper_backwards(ctx, scope) if direct else {}
            returning = _returning_helpers(ctx, scope) if direct else {}
            calls = sorted(direct + list(helpers) + list(returning), key=lambda c: (c.node.lineno, c.node.col_offset))
            following = same_pass_later(ctx, scope, [ctx.statement_of(c.node) for c in calls], allow_first_loop=True)  # the only later calls to ask
            for index, call in enumerate(calls):
                if retains_graph(call) or not (_saves(*returning[call]) if call in returning else _saves(ctx, scope, call)):
                    continue
                stmt = ctx.statement_of(call.node)
                for later in (calls[i] for i in following[index]):
                    later_stmt = ctx.statement_of(later.node)
                    if call in returning and later not in helpers and later not in returning and runs_after_in_same_pass(ctx, scope, stmt, later_stmt):
                        if dotted(later.target) == dotted(call.target) and _unchanged_between(ctx, scope, call, later):
                            yield self._delete_returned(ctx, call, later, returning[call][2])
                            break
                    if runs_after_in_same_pass(ctx, scope, stmt, later_stmt) and same_value(ctx, scope, call, later):
                        if call in helpers:
                            yield self._retain_in_helper(ctx, call, *helpers[call], later)
                        elif later not in helpers and _step_between(ctx, scope, stmt, later_stmt):
                            yield self._delete_after_step(ctx, call, later)
                        elif later not in helpers:
                            yield self._retain(ctx, call, later)
                        break
                    if backwarded_again_after_loop(ctx, scope, call, later):
                        yield self._delete(ctx, call, later)
                        break

    def _retain(self, ctx: FileContext, call: BackwardCall, later: BackwardCall) -> Diagnostic:
        name = ctx.text(call.target)
        if call.kind == "autograd.grad":  # returns gradients without accumulating: nothing doubles
            return self.diagnostic(
                ctx,
                call.node,
                f"`{name}` is backpropagated again on line {later.node.lineno}, after this autograd.grad freed its "
                f"graph: that call raises 'backward through the graph a second time'. Pass retain_graph=True here",
                [keyword_edit(ctx, call.node, "retain_graph")],
                Applicability.SAFE,
                title="Pass retain_graph=True",
            )
        return self.diagnostic(
            ctx,
            call.node,
            f"`{name}` is backpropagated again on line {later.node.lineno}, after this call freed its graph: "
            f"that call raises 'backward through the graph a second time'. A repeated backward doubles "
            f"`{name}`'s gradients and is usually a mistake (delete one call); if it is intended, pass "
            f"retain_graph=True here",
            [keyword_edit(ctx, call.node, "retain_graph")],
            Applicability.UNSAFE,
            title="Pass retain_graph=True (the gradients are added twice)",
        )

    def _retain_in_helper(self, ctx: FileContext, call: BackwardCall, inner: BackwardCall, here: bool, later: BackwardCall) -> Diagnostic:
        """``here``: the helper is in this file (an edit of another file is never made from this one)."""
        name, helper = ctx.text(call.target), ctx.text(call.node.func)
        return self.diagnostic(
            ctx,
            call.node,
            f"`{helper}` backpropagates `{name}` (its line {inner.node.lineno}) and `{name}` is backpropagated again on "
            f"line {later.node.lineno}, after that call freed its graph: it raises 'backward through the graph a "
            f"second time'. The gradients are added twice; usually one backward is a mistake. If both are "
            f"intended, pass retain_graph=True inside `{helper}`",
            [keyword_edit(ctx, inner.node, "retain_graph")] if here else [],
            Applicability.UNSAFE,
            title=f"Pass retain_graph=True in `{helper}`",
        )

    def _delete_after_step(self, ctx: FileContext, call: BackwardCall, later: BackwardCall) -> Diagnostic:
        return self._delete_later(
            ctx, call, later,
            f"was already backpropagated on line {call.node.lineno} and an optimizer step ran since: this "
            f"call walks the freed graph again and raises 'backward through the graph a second time' (with "
            f"retain_graph=True it would meet the parameters the step changed in place). Delete it",
        )

    def _delete(self, ctx: FileContext, call: BackwardCall, later: BackwardCall) -> Diagnostic:
        return self._delete_later(
            ctx, call, later,
            f"was already backpropagated in the loop above (line {call.node.lineno}); this call walks the "
            f"last iteration's freed graph again and raises 'backward through the graph a second time'. "
            f"Delete it: the loop already accumulated every iteration's gradients",
        )

    def _delete_returned(self, ctx: FileContext, call: BackwardCall, later: BackwardCall, inner: BackwardCall) -> Diagnostic:
        helper = ctx.text(call.node.func)
        return self._delete_later(
            ctx, call, later,
            f"is what `{helper}` returns after backpropagating it (its line {inner.node.lineno}); this call walks "
            f"that freed graph again and raises 'backward through the graph a second time'. Delete it",
        )

    def _delete_later(self, ctx: FileContext, call: BackwardCall, later: BackwardCall, why: str) -> Diagnostic:
        """Delete the later backward's statement (when it stands alone on its lines)."""
        name = ctx.text(call.target)
        stmt = ctx.statement_of(later.node)
        own = isinstance(stmt, ast.Expr) and stmt.value is later.node and ctx.is_own_line(stmt)
        edits = [Edit(ctx.line_start(stmt.lineno), ctx.line_end(stmt.end_lineno), "")] if own else []
        return self.diagnostic(
            ctx, later.node, f"`{name}` {why}", edits, Applicability.UNSAFE, title=f"Delete the extra `{name}` backward"
        )


def _helper_backwards(ctx: FileContext, scope: Scope) -> dict[BackwardCall, tuple[BackwardCall, bool]]:
    """Calls of a function of this file or another project file that always backpropagates one of its parameters
    (``grad_norm(model, loss)`` doing ``loss.backward()``), as a backward of the argument,
    mapped to the backward call inside the helper and whether the helper is in this file."""
    found: dict[BackwardCall, tuple[BackwardCall, bool]] = {}
    if not _may_call_steps(ctx, scope):
        return found  # no call of a function that backpropagates
    for node in scope_nodes(scope):
        found_helper = _step_helper(ctx, scope, node) if isinstance(node, ast.Call) else None
        if found_helper is None:
            continue
        helper, own = found_helper
        params = [a.arg for a in helper.node.args.posonlyargs + helper.node.args.args]
        if helper.class_node is not None and params:
            params = params[1:]  # self
        for inner in backward_calls(own, helper):
            target = dotted(inner.target)
            if inner.kind != "method" or retains_graph(inner) or target not in params:
                continue
            if not always_runs(own, own.statement_of(inner.node), helper.node):
                continue
            index = params.index(target)
            argument = held_name(ctx, scope, node.args[index]) or node.args[index] if index < len(node.args) else None
            if argument is not None and dotted(argument):  # loss, self.loss, out["loss"]
                found[BackwardCall(node, argument, "helper")] = (inner, own is ctx)
    return found


def _returning_helpers(ctx: FileContext, scope: Scope) -> dict[BackwardCall, tuple[FileContext, Scope, BackwardCall]]:
    """``loss = train_step(...)`` (or ``..., loss = ...``) where the function of this file or of
    another project file returns, at that place, a value it backpropagated and freed on every
    call: a backward of ``loss`` at the call, mapped to (the helper's file, the helper, its backward
    call)."""
    found: dict[BackwardCall, tuple[FileContext, Scope, BackwardCall]] = {}
    if not _may_call_steps(ctx, scope):
        return found
    for node in scope_nodes(scope):
        stmt = ctx.parent(node) if isinstance(node, ast.Call) else None
        if not isinstance(stmt, ast.Assign) or stmt.value is not node or len(stmt.targets) != 1:
            continue
        found_helper = _step_helper(ctx, scope, node)
        if found_helper is None:
            continue
        helper, own = found_helper
        for slot, target in _slots(stmt.targets[0]):
            inner = _returned_backpropagated(own, helper, slot)
            if inner is not None:
                found[BackwardCall(node, target, "helper")] = (own, helper, inner)
    return found


def _step_helper(ctx: FileContext, scope: Scope, call: ast.Call) -> Optional[tuple[Scope, FileContext]]:
    """(the function ``call`` runs, the file it is read in) when it may hold a backward pass: a
    function of this file that backpropagates or an import of a project file whose definition
    does (the name is asked first, so other calls are never resolved)."""
    name = dotted(call.func) or ""
    steps = _step_names(ctx)
    if name.rpartition(".")[2] not in steps and name.partition(".")[0] not in steps:
        return None
    helper = called_function(ctx, scope, call.func)
    if helper is None or helper.node is scope.node or isinstance(helper.node, ast.Module):
        return None
    return helper, helper.ctx or ctx  # a function of another project file is read in its own file


def _step_names(ctx: FileContext) -> frozenset[str]:
    """Names a call may use to reach a function that holds a backward pass: the file's own
    (``training_functions``) and imports of project files whose definition holds one."""
    return ctx.memo("repeated_step_names", lambda: frozenset(training_functions(ctx)) | frozenset(imported_step_names(ctx)))


def _may_call_steps(ctx: FileContext, scope: Scope) -> bool:
    """The scope's text calls a function of this file, or names an import of another project
    file, that holds a backward pass (a cheap gate before walking it)."""
    if ctx.mentions(scope.node, training_call_text(ctx)):
        return True
    pattern = ctx.memo("imported_step_pattern", lambda: _words(imported_step_names(ctx)))
    return pattern is not None and ctx.mentions(scope.node, pattern)


def _words(names: set[str]) -> Optional["re.Pattern[str]"]:
    return re.compile(r"\b(?:%s)\b" % "|".join(map(re.escape, sorted(names)))) if names else None


def _slots(target: ast.expr) -> list[tuple[Optional[int], ast.expr]]:
    """(position in the result or None for all of it, the name or field it is bound to)."""
    def named(node: ast.expr) -> bool:  # ``loss`` or ``self.loss``
        return isinstance(node, ast.Name) or isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)

    if named(target):
        return [(None, target)]
    if isinstance(target, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in target.elts):
        return [(i, e) for i, e in enumerate(target.elts) if named(e)]
    return []


def _returned_backpropagated(ctx: FileContext, helper: Scope, slot: Optional[int]) -> Optional[BackwardCall]:
    """The helper's backward call that frees, on every call, the name every ``return`` hands back
    at ``slot`` (None: the whole value)."""
    returns = [n for n in scope_nodes(helper) if isinstance(n, ast.Return)]
    names = set()
    for ret in returns:
        value = ret.value
        if slot is not None:
            value = value.elts[slot] if isinstance(value, ast.Tuple) and slot < len(value.elts) else None
        value = held_name(ctx, helper, value) or value if value is not None else None  # return out["loss"]
        if not isinstance(value, ast.Name):
            return None
        names.add(value.id)
    if len(names) != 1:
        return None
    name = names.pop()
    graph = facts(ctx, helper)
    for inner in backward_calls(ctx, helper):
        stmt = ctx.statement_of(inner.node)
        if inner.kind != "method" or retains_graph(inner) or dotted(inner.target) != name or ctx.parent(stmt) is not helper.node:
            continue
        if all(not ((s.lineno, s.col_offset) > (stmt.lineno, stmt.col_offset)) for s, _ in graph.assignments.get(name, [])):
            return inner  # not rebound after its backward
    return None


def _unchanged_between(ctx: FileContext, scope: Scope, call: BackwardCall, later: BackwardCall) -> bool:
    """The name ``later`` backpropagates still holds what the helper returned at ``call``: its
    reaching definition at ``later`` is that call's assignment alone."""
    defs = facts(ctx, scope).reaching(dotted(later.target), later.node)
    return len(defs) == 1 and defs[0][0] is ctx.parent(call.node)


def _step_between(ctx: FileContext, scope: Scope, first: ast.stmt, second: ast.stmt) -> bool:
    """An optimizer step runs between the two statements (same pass, source order)."""
    start, end = (first.end_lineno, first.end_col_offset), (second.lineno, second.col_offset)
    return any(
        o.kind == "step" and start <= (o.node.lineno, o.node.col_offset) < end for o in optimizer_calls(ctx, scope)
    )


def _saves(ctx: FileContext, scope, call: BackwardCall) -> bool:
    """The target's graph certainly saved tensors (a module, criterion or multiplying operation)."""
    return any(origin.saves for origin in graph_origins(ctx, scope, call.target, call.node))
