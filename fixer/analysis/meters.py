"""Average meters: objects whose ``update(value, ...)`` sums the value into their fields.

``is_meter(receiver, graph)`` judges ``receiver`` of ``receiver.update(...)`` by what it is bound
to: an instance of a project class is a meter when its ``update`` keeps its first argument
(``instances.keeps_argument``), whatever the names say; a dict of such instances holds meters. A
class graphfix cannot read (another package's) is unknown: no meter, whatever its name. With
``index``, the same question of the update's argument at that position (``stats.update(loss,
parts)`` whose ``update`` also sums the elements of ``parts``)."""

from __future__ import annotations

import ast
import functools
from typing import Optional

from fixer.analysis.assignments import scope_assignments
from fixer.analysis.callees import instance_class
from fixer.analysis.class_model import held_for_life
from fixer.analysis.graph import GraphFacts
from fixer.analysis.imported_definitions import imported_class
from fixer.analysis.instances import keeps_argument
from fixer.analysis.names import dotted, qualified
from fixer.analysis.project_callers import project_life_field
from fixer.analysis.scopes import statement_index
from fixer.analysis.threaded import argument_values
from fixer.context import FileContext


def is_meter(receiver: ast.expr, graph: Optional[GraphFacts], index: int = 0) -> bool:
    """An average meter (``losses = AverageMeter()``, ``meters["loss"]`` of ``meters =
    {"loss": AverageMeter()}``, a parameter or field given one): its ``update`` sums the value."""
    holder = container(receiver)
    name = dotted(holder)
    defs = graph.assignments.get(name, []) if graph and name else []
    judge = functools.partial(_meter_values if isinstance(receiver, ast.Subscript) else _is_meter_call, index=index)
    values = [v for _, v in defs]
    if graph and not defs and name and graph.scope is not None:  # a parameter: what the callers pass
        values = argument_values(graph.ctx, graph.scope, name) or []
        me = graph.scope.self_name
        given = held_for_life(graph.ctx).get("self." + name[len(me) + 1 :]) if me and name.startswith(me + ".") else None
        if given is not None:  # self.losses given at the one construction (Trainer(..., losses)): what that name is bound to
            values = [a.value for a in statement_index(graph.ctx).assigns if any(dotted(t) == given for t in a.targets)]
        elif me and isinstance(holder, ast.Attribute) and (found := project_life_field(graph.ctx, graph.scope, holder)) is not None:
            own, scope, argument = found  # given at a construction in another file: judged there
            values = [v for _, v in scope_assignments(own, scope).assignments.get(argument.id, [])] if isinstance(argument, ast.Name) else [argument]
            return bool(values) and all(judge(own, v) for v in values)
    verdicts = [judge(graph.ctx, v) for v in values] if graph else []
    if verdicts and None not in verdicts:
        return all(verdicts)
    if any(verdict is False for verdict in verdicts):
        return False
    return False


def _is_meter_call(ctx: FileContext, value: Optional[ast.expr], index: int = 0) -> Optional[bool]:
    """``Meter()``: its class's ``update`` keeps the value (a class of this file or of another
    project file); None when the class cannot be read."""
    cls = instance_class(ctx, value)
    kept = keeps_argument(ctx, cls, "update", index) if cls is not None else None
    if cls is None and isinstance(value, ast.Call):  # a class of another project file, read there
        found = imported_class(ctx, qualified(ctx, value.func) or "")
        kept = keeps_argument(found[0], found[1], "update", index) if found is not None else None
    if kept is not None:
        return kept
    return None


def _meter_values(ctx: FileContext, value: Optional[ast.expr], index: int = 0) -> Optional[bool]:
    """``{"loss": AverageMeter(), ...}``, ``{k: AverageMeter() for k in names}`` (maybe in
    ``OrderedDict(...)``): a dict of meters, as ``_is_meter_call`` judges its values."""
    if isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
        value = value.args[0]
    values = value.values if isinstance(value, ast.Dict) else [value.value] if isinstance(value, ast.DictComp) else []
    verdicts = [_is_meter_call(ctx, v, index) for v in values]
    if False in verdicts:
        return False
    return True if verdicts and None not in verdicts else None


def container(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Subscript):
        node = node.value
    return node
