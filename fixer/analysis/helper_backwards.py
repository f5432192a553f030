"""Backward passes inside helpers, seen from the call (GF106's query): a call of a function of
this file or of another project file that always backpropagates one of its parameters
(``grad_norm(model, loss)`` doing ``loss.backward()``) is a backward of the argument; ``loss =
train_step(...)`` whose function returns a value it backpropagated and freed on every call binds
a freed graph. The names a call may use to reach such a function gate both, so that other calls
are never resolved."""

from __future__ import annotations

import ast
import re
from typing import Optional

from fixer.analysis.call_sites import field_instance, holds_instance
from fixer.analysis.call_events import runs_on_call
from fixer.analysis.callees import called_function, imported_instance_of
from fixer.analysis.calls import BackwardCall, backward_calls, retains_graph, training_call_text, training_functions
from fixer.analysis.carried_flow import always_runs
from fixer.analysis.class_model import attribute_writes
from fixer.analysis.graph import facts
from fixer.analysis.held_values import held_name
from fixer.analysis.imported_definitions import imported_step_names
from fixer.analysis.loop_reach import stored_from_outside
from fixer.analysis.names import dotted
from fixer.analysis.returned_reads import returned_field
from fixer.analysis.scopes import CALLS, RETURNS, Scope, nodes_of
from fixer.context import FileContext


CALLS_AND_FIELDS = frozenset({ast.Call, ast.Attribute})


def helper_backwards(ctx: FileContext, scope: Scope) -> dict[BackwardCall, tuple[BackwardCall, bool]]:
    """Calls of a function of this file or another project file that always backpropagates one of its parameters
    (``grad_norm(model, loss)`` doing ``loss.backward()``), as a backward of the argument,
    mapped to the backward call inside the helper and whether the helper is in this file."""
    found: dict[BackwardCall, tuple[BackwardCall, bool]] = {}
    if not _may_call_steps(ctx, scope):
        return found  # no call of a function that backpropagates
    for node in nodes_of(scope, CALLS):
        found_helper = _step_helper(ctx, scope, node)
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


def returning_helpers(ctx: FileContext, scope: Scope) -> dict[BackwardCall, tuple[FileContext, Scope, BackwardCall]]:
    """``loss = train_step(...)`` (or ``..., loss = ...``) where the function of this file or of
    another project file returns, at that place, a value it backpropagated and freed on every
    call: a backward of ``loss`` at the call, mapped to (the helper's file, the helper, its backward
    call)."""
    found: dict[BackwardCall, tuple[FileContext, Scope, BackwardCall]] = {}
    if not _may_call_steps(ctx, scope):
        return found
    for node in nodes_of(scope, CALLS_AND_FIELDS):  # (``loss = trainer.loss``: a field read back)
        stmt = ctx.parent(node)
        if not isinstance(stmt, ast.Assign) or stmt.value is not node or len(stmt.targets) != 1:
            continue
        field = node if isinstance(node, ast.Attribute) else returned_field(ctx, node)  # (``loss = last_loss(trainer)``)
        if field is not None:
            kept = _field_backpropagated(ctx, scope, field)
            if kept is not None and dotted(stmt.targets[0]):
                found[BackwardCall(node, stmt.targets[0], "helper")] = kept
            continue
        found_helper = _step_helper(ctx, scope, node)
        if found_helper is None:
            continue
        helper, own = found_helper
        for slot, target in _slots(stmt.targets[0]):
            inner = _returned_backpropagated(own, helper, slot, node)
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


def _returned_backpropagated(ctx: FileContext, helper: Scope, slot: Optional[int], call: ast.Call) -> Optional[BackwardCall]:
    """The helper's backward call that frees, on every such ``call``, the name every ``return``
    hands back at ``slot`` (None: the whole value)."""
    returns = [n for n in nodes_of(helper, RETURNS) if isinstance(n, ast.Return)]
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
    return _freed_at_end(ctx, helper, names.pop(), call)


def _field_backpropagated(ctx: FileContext, scope: Scope, read: ast.Attribute) -> Optional[tuple[FileContext, Scope, BackwardCall]]:
    """``loss = trainer.loss`` (``self.last = self.micro.loss``): ``trainer`` holds an instance of a class of this file (or a
    name every binding of which makes one of another file's class) whose one method that stores the field (``__init__`` does
    not, nor any code outside the class, here or in its file) stores it and then backpropagates and frees it on every call:
    whatever the read finds is a freed graph. (The class's file, the method, its backward call.)"""
    if read.attr in stored_from_outside(ctx):
        return None
    owners = [(ctx, c) for c in ctx.tree.body if isinstance(c, ast.ClassDef) and _holds(ctx, scope, read.value, c)]
    if not owners and isinstance(read.value, ast.Name) and (imported := imported_instance_of(ctx, scope, read.value.id)):
        owners = [imported] if read.attr not in stored_from_outside(imported[0]) else []
    for own, cls in owners:
        writes = attribute_writes(own, cls).get(read.attr, [])
        methods = {id(w.method.node): w.method for w in writes}
        if len(methods) != 1 or writes[0].method.node.name == "__init__":
            continue
        method = writes[0].method
        inner = _freed_at_end(own, method, f"{method.self_name}.{read.attr}")
        return (own, method, inner) if inner is not None else None
    return None


def _holds(ctx: FileContext, scope: Scope, receiver: ast.expr, cls: ast.ClassDef) -> bool:
    """``receiver`` (``trainer``, ``self.micro``) holds an instance of ``cls``."""
    if isinstance(receiver, ast.Name):
        return holds_instance(ctx, scope, receiver.id, cls)
    return scope.self_name is not None and field_instance(ctx, scope, receiver, cls)


def _freed_at_end(ctx: FileContext, helper: Scope, name: str, call: Optional[ast.Call] = None) -> Optional[BackwardCall]:
    """The helper's backward call of ``name`` that frees its graph, a statement of the helper's own
    body (or, for ``call``, one under flags the call decides to run it: ``if backward:`` with
    ``backward=True`` by default) that nothing rebinds ``name`` after."""
    graph = facts(ctx, helper)
    for inner in backward_calls(ctx, helper):
        stmt = ctx.statement_of(inner.node)
        if inner.kind != "method" or retains_graph(inner) or dotted(inner.target) != name:
            continue
        if ctx.parent(stmt) is not helper.node and not (call is not None and runs_on_call(ctx, helper, call, stmt)):
            continue
        if all(not ((s.lineno, s.col_offset) > (stmt.lineno, stmt.col_offset)) for s, _ in graph.assignments.get(name, [])):
            return inner  # not rebound after its backward
    return None
