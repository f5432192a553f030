"""A parameter threaded through a loop: ``total, loss = step(x, total)`` in a loop.

A function that takes a running value, updates it and hands it back (``def step(x, total): ...
total += loss; return total, loss``) keeps that value alive across the caller's iterations when
a call in a loop binds the returned value back to the very name it passed in. Inside the
function the parameter then behaves as a value that outlives the iteration: whatever the
function adds to it stays reachable in the next call.

``returned_into(ctx, scope, name)`` is more general: what the function returns at the position
the caller binds back to the argument it passes (``previous, loss = step(x, previous)`` with
``return prediction, loss``), the value the parameter holds on the next call.

``threaded_parameter(ctx, scope, name)`` is True when the function of ``scope`` returns
``name`` (whole, or at one fixed position of every returned tuple), is used in this file only by
calls, and at least one call in a loop passes a name for that parameter and binds the returned
value to the same name, which the loop does not bind otherwise.
"""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.call_sites import argument_of, call_sites, parameter_position
from fixer.analysis.graph import facts
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.scopes import Scope, enclosing_loops, scope_nodes
from fixer.context import FileContext
from fixer.nodes import walk

WHOLE = -1  # ``return total``: the returned value itself


def threaded_parameter(ctx: FileContext, scope: Scope, name: str) -> bool:
    return ctx.memo(("threaded", id(scope.node), name), lambda: _threaded(ctx, scope, name))


def _threaded(ctx: FileContext, scope: Scope, name: str) -> bool:
    slot = _returned_slot(scope, name) if _plain_function(scope) else None
    return slot is not None and _caller_slot(ctx, scope, name) == slot


def returned_into(ctx: FileContext, scope: Scope, name: str) -> Optional[list[tuple[ast.Return, ast.expr]]]:
    """What the function's returns hand into the parameter ``name`` of the next call: the values
    at the position that a call in a loop binds back to the name it passes for ``name``
    (``previous, loss = step(x, previous)`` with ``return prediction, loss``). None when no call
    threads it, or some return has no value there."""

    def compute() -> Optional[list[tuple[ast.Return, ast.expr]]]:
        slot = _caller_slot(ctx, scope, name) if _plain_function(scope) else None
        if slot is None:
            return None
        found = []
        for node in scope_nodes(scope):
            if not isinstance(node, ast.Return) or node.value is None:
                continue
            if slot == WHOLE:
                found.append((node, node.value))
            elif isinstance(node.value, ast.Tuple) and slot < len(node.value.elts) and not any(isinstance(e, ast.Starred) for e in node.value.elts):
                found.append((node, node.value.elts[slot]))
            else:
                return None
        return found or None

    return ctx.memo(("returned_into", id(scope.node), name), compute)


def _plain_function(scope: Scope) -> bool:
    return isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not scope.node.decorator_list


def _caller_slot(ctx: FileContext, scope: Scope, name: str) -> Optional[int]:
    """The one position of the result that calls in loops bind back to the argument they pass for
    ``name``; None if there is none, several, or the function is also used as a value."""
    position = parameter_position(scope, name)
    if position is None:
        return None
    slots = set()
    for own, caller, call in project_call_sites(ctx, scope):
        if call is None:
            return None  # passed around as a value: other callers are unknown
        argument = argument_of(call, name, position)
        if isinstance(argument, ast.Name):
            slot = _bound_slot(own, caller, call, argument.id)
            if slot is not None:
                slots.add(slot)
    return slots.pop() if len(slots) == 1 else None


def persistent_argument(ctx: FileContext, scope: Scope, name: str) -> bool:
    return ctx.memo(("persistent", id(scope.node), name), lambda: _persistent(ctx, scope, name))


def _persistent(ctx: FileContext, scope: Scope, name: str) -> bool:
    if not isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or scope.node.decorator_list:
        return False
    position = parameter_position(scope, name)
    if position is None or any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del)) for n in scope_nodes(scope)):
        return False  # rebound inside the function: later changes are not the caller's object
    persistent = False
    for own, caller, call in project_call_sites(ctx, scope):
        if call is None:
            return False
        argument = argument_of(call, name, position)
        if isinstance(argument, ast.Name) and _kept_by_loop(own, caller, own.statement_of(call), argument.id):
            persistent = True
    return persistent


def _kept_by_loop(ctx: FileContext, caller: Scope, stmt: ast.stmt, name: str, allowed: Optional[ast.AST] = None) -> bool:
    """``stmt`` is in a loop of ``caller`` whose innermost loop binds ``name`` only in ``allowed``."""
    loops = enclosing_loops(ctx, stmt, caller)
    if not loops:
        return False
    inside_allowed = {id(t) for t in walk(allowed)} if allowed is not None else set()
    return not any(
        isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del)) and id(node) not in inside_allowed
        for node in walk(loops[0])
    )


def argument_values(ctx: FileContext, scope: Scope, name: str) -> Optional[list[ast.expr]]:
    """What this file's calls bind the parameter to: the argument, or for a name the values the
    caller assigns it (``losses = AverageMeter()``). None when some call or value is unknown."""
    if not isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    position = parameter_position(scope, name)
    if position is None:
        return None
    values: list[ast.expr] = []
    for caller, call in call_sites(ctx, scope):
        argument = argument_of(call, name, position) if call is not None else None
        if argument is None or isinstance(argument, ast.Starred):
            return None
        if isinstance(argument, ast.Name):
            assigned = facts(ctx, caller).assignments.get(argument.id)
            if not assigned or any(v is None for _, v in assigned):
                return None
            values += [v for _, v in assigned]
        else:
            values.append(argument)
    return values or None


def _returned_slot(scope: Scope, name: str) -> Optional[int]:
    """Where every ``return`` hands ``name`` back: WHOLE, a tuple position, or None."""
    slots = set()
    for node in scope_nodes(scope):
        if isinstance(node, ast.Return):
            value = node.value
            if isinstance(value, ast.Name) and value.id == name:
                slots.add(WHOLE)
            elif isinstance(value, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in value.elts):
                found = [i for i, e in enumerate(value.elts) if isinstance(e, ast.Name) and e.id == name]
                slots.add(found[0] if len(found) == 1 else None)
            else:
                return None
    return slots.pop() if len(slots) == 1 and None not in slots else None


def _bound_slot(ctx: FileContext, caller: Scope, call: ast.Call, name: str) -> Optional[int]:
    """Where ``name = f(..., name)`` or ``..., name, ... = f(...)`` in a loop of ``caller`` that
    binds ``name`` nowhere else takes ``name`` from the result: WHOLE or a tuple position."""
    stmt = ctx.parent(call)
    if not isinstance(stmt, ast.Assign) or stmt.value is not call or len(stmt.targets) != 1:
        return None
    target = stmt.targets[0]
    if isinstance(target, ast.Name):
        slot = WHOLE if target.id == name else None
    elif isinstance(target, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in target.elts):
        found = [i for i, e in enumerate(target.elts) if isinstance(e, ast.Name) and e.id == name]
        slot = found[0] if len(found) == 1 else None
    else:
        slot = None
    return slot if slot is not None and _kept_by_loop(ctx, caller, stmt, name, target) else None
