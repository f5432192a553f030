"""Who calls a function or a method, across the project: one caller answer for the analysis.

``project_call_sites(ctx, scope)`` is this file's call sites (``call_sites.call_sites``), the calls
of the files that import the function's module or construct the method's class
(``importers.importer_calls``), and the calls of this file on a field that only the other files
show to hold an instance of the method's class: the class's one construction in the project gives
it one for life (``project_life_field``). (A plain function's parameter that the importing files'
calls give an instance is placed by ``call_sites.instance_parameters`` itself.) A use that is not a call gives None: an unknown
caller. ``step_arguments`` is what each of those calls passes a plain function's parameter."""

from __future__ import annotations

import ast
import os
from typing import Iterator, Optional

from fixer.analysis.assignments import scope_assignments
from fixer.analysis.call_sites import STARRED, argument_of, call_sites, given_instance, life_field, parameter_position, uses_of
from fixer.analysis.class_model import attribute_store_lines, written_only_in
from fixer.analysis.importers import class_importers, construction_arguments, importer_calls, neighbours_naming
from fixer.analysis.scopes import Scope, scope_of
from fixer.context import FileContext

Site = tuple[FileContext, Scope, Optional[ast.Call]]


def project_call_sites(ctx: FileContext, scope: Scope) -> Iterator[Site]:
    """(caller's file, caller, call or None for a use that is not a call)."""
    for caller, call in call_sites(ctx, scope):
        yield ctx, caller, call
    if scope.class_node is not None:
        yield from _held_elsewhere(ctx, scope)
    for imported in importer_calls(ctx, scope):
        yield imported.ctx, imported.scope, imported.call


def _held_elsewhere(ctx: FileContext, method: Scope) -> Iterator[Site]:
    """This file's calls of the method on a receiver that ``call_sites`` cannot place and the
    project can: a field ``self.attr`` given at a construction in another file."""
    known = {id(call) for _, call in call_sites(ctx, method)}
    cls, name = method.class_node, method.node.name
    for caller, node in uses_of(ctx, name):
        call = ctx.parent(node)
        if not (isinstance(node, ast.Attribute) and isinstance(call, ast.Call) and call.func is node) or id(call) in known:
            continue
        receiver = node.value
        if isinstance(receiver, ast.Attribute) and (given := project_life_field(ctx, caller, receiver)) is not None \
                and given_instance(given[0], given[1], given[2], ctx, cls):
            yield ctx, caller, call


def step_arguments(ctx: FileContext, function: Scope, name: str) -> Iterator[tuple[FileContext, Scope, ast.Call, ast.expr]]:
    """(caller's file, caller, call, argument) for each call in the project of a plain function
    that passes its parameter ``name``, when the function never rebinds it."""
    if not isinstance(function.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or function.class_node is not None:
        return
    position = parameter_position(function, name)
    if position is None or scope_assignments(ctx, function).assignments.get(name):
        return
    for own, caller, call in project_call_sites(ctx, function):
        argument = argument_of(call, name, position) if call is not None else None
        if argument is not None and argument is not STARRED:
            yield own, caller, call, argument


def project_life_field(ctx: FileContext, method: Scope, receiver: ast.expr) -> Optional[tuple[FileContext, Scope, ast.expr]]:
    """``call_sites.life_field`` across the project: what ``self.attr`` (``receiver``, in a method)
    holds for the object's whole life, as (file, scope, argument) of the class's one construction
    in its own file or in a file importing it, when no code outside the class stores ``.attr``
    there or in the files around it that name ``attr``."""
    local = life_field(ctx, method, receiver)
    if local is not None:
        return ctx, scope_of(ctx, local), local
    cls = method.class_node
    if not (isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name) and method.self_name
            and receiver.value.id == method.self_name and cls is not None and written_only_in(ctx, cls, receiver.attr)):
        return None
    here = os.path.abspath(ctx.path)
    if any(os.path.abspath(other.path) != here and attribute_store_lines(other, receiver.attr)
           for other in [*class_importers(ctx, cls), *neighbours_naming(ctx, receiver.attr)]):
        return None
    given = construction_arguments(ctx, cls, receiver.attr)
    return given[0] if given is not None and len(given) == 1 else None
