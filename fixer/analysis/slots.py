"""Dict slots with a constant key as holders: ``self.nets["G"]`` names what ``self.nets = {"G": G(),
"D": D()}`` put there, as ``self.netG`` names a field.

``slot_name(node)`` spells a holder: the dotted name of a Name/Attribute chain, or ``base['key']``
for a constant-key subscript of one (None otherwise). ``dict_slots(ctx, assign)`` lists the slots an
assignment fills, each with the value it stores and the names that value reads bound to other
slots: ``{"G": g, "D": d}`` gives ``X['G']`` -> ``g``; a comprehension over another holder's items,
``{k: Adam(n.parameters()) for k, n in self.nets.items()}``, gives ``X['G']`` -> ``Adam(...)`` with
``n`` standing for ``self.nets['G']``, when ``self.nets`` is bound once in that function to a dict
literal of constant keys. ``stable_field(ctx, cls, attr)``: the field is set only by ``__init__``
and nothing stores into its slots or calls a method on it other than reading ones, so each slot
holds the same object for the object's life."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.class_model import attribute_writes, class_methods
from fixer.analysis.names import dotted
from fixer.analysis.scopes import scope_nodes
from fixer.context import FileContext
from fixer.nodes import walk

READING = frozenset({"items", "values", "keys", "get", "parameters", "named_parameters"})
Slot = tuple[ast.expr, dict[str, str]]  # the stored value, names in it standing for other slots


def slot_name(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, (str, int)):
        base = dotted(node.value)
        return f"{base}[{node.slice.value!r}]" if base else None
    return dotted(node)


def dict_slots(ctx: FileContext, assign: ast.Assign) -> dict[str, Slot]:
    if len(assign.targets) != 1 or (holder := dotted(assign.targets[0])) is None:
        return {}
    value = assign.value
    if isinstance(value, ast.Dict):
        keys = [k.value if isinstance(k, ast.Constant) else None for k in value.keys]
        if any(k is None or not isinstance(k, (str, int)) for k in keys):
            return {}
        return {f"{holder}[{k!r}]": (v, {}) for k, v in zip(keys, value.values)}
    if not (isinstance(value, ast.DictComp) and len(value.generators) == 1 and not value.generators[0].ifs):
        return {}
    loop = value.generators[0]
    source = loop.iter.func.value if isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Attribute) \
        and loop.iter.func.attr == "items" and not loop.iter.args else None
    target = loop.target
    if source is None or not (isinstance(target, ast.Tuple) and len(target.elts) == 2 and all(isinstance(e, ast.Name) for e in target.elts)):
        return {}
    key, element = target.elts[0].id, target.elts[1].id
    if not (isinstance(value.key, ast.Name) and value.key.id == key) or key in {n.id for n in walk(value.value) if isinstance(n, ast.Name)}:
        return {}
    literal = _one_dict_literal(ctx, assign, dotted(source))
    if literal is None:
        return {}
    return {f"{holder}[{k!r}]": (value.value, {element: f"{dotted(source)}[{k!r}]"}) for k in literal}


def _one_dict_literal(ctx: FileContext, assign: ast.Assign, holder: Optional[str]) -> Optional[list]:
    """The constant keys of the one dict literal ``holder`` is bound to, before ``assign``, in its function."""
    function = next((a for a in ctx.ancestors(assign) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module))), None)
    if holder is None or function is None:
        return None
    found = [n for n in walk(function) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
             and any(dotted(t) == holder for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))]
    if len(found) != 1 or not isinstance(found[0], ast.Assign) or not isinstance(found[0].value, ast.Dict):
        return None
    if (found[0].lineno, found[0].col_offset) >= (assign.lineno, assign.col_offset):
        return None
    keys = [k.value if isinstance(k, ast.Constant) else None for k in found[0].value.keys]
    return None if any(k is None or not isinstance(k, (str, int)) for k in keys) else keys


def stable_field(ctx: FileContext, cls: ast.ClassDef, attr: str) -> bool:
    writes = attribute_writes(ctx, cls).get(attr, [])
    if len(writes) != 1 or writes[0].method.node.name != "__init__" or not writes[0].every_call:
        return False
    for method in class_methods(ctx, cls).values():
        for node in scope_nodes(method):
            if not (isinstance(node, ast.Attribute) and node.attr == attr and dotted(node.value) == method.self_name):
                continue
            parent = ctx.parent(node)
            if isinstance(parent, ast.Subscript) and not isinstance(parent.ctx, ast.Load):
                return False  # self.nets["G"] = ...: a slot replaced
            if isinstance(parent, ast.Attribute) and parent.attr not in READING:
                return False  # self.nets.update(...), .pop(...): slots changed
    return True
