"""The constants a flag read from a configuration object can hold: ``self.cfg.retain_graph``,
``cfg.retain_graph``, ``self.retain_graph`` or ``Config.retain_graph``, where the object is an
instance of a class of this file (``call_sites.path_instance``: a name bound only to ``Cls(...)``,
a field its class's one construction gives one, or a method's own ``self``) or of a class
imported from another project file (``callees.imported_instance_of``), or the class itself.

``constant_values(ctx, scope, expr)`` is the set of constants every path can give ``expr``: a
constant; a module-level name bound only to constants; a field's value, which is the union of
its class-body value (a class attribute, a dataclass field's default), the argument each
construction in the project passes for a dataclass field or for the ``__init__`` parameter
stored there (or that parameter's default), and every constant a method writes to it. None
(unknown) when any part is not a constant, when a construction hides arguments (``*``/``**``),
when the class has bases (inherited fields), when its name is used other than by constructions
(``dataclasses.replace``, passed on, subclassed), or when code outside the class may store the
field (``cfg.flag = ...``, ``setattr``, ``vars``/``__dict__``) in its file, the reading file or a
file importing the class."""

from __future__ import annotations

import ast
import os
from typing import Optional

from fixer.analysis.arguments import bound_arguments
from fixer.analysis.call_sites import path_instance
from fixer.analysis.callees import imported_instance_of
from fixer.analysis.class_model import attribute_store_lines, attribute_writes, class_methods, init_parameter, written_only_in
from fixer.analysis.imported_definitions import imported_class
from fixer.analysis.importers import class_importers, neighbours_naming, project_constructions
from fixer.analysis.project_callers import project_life_field
from fixer.analysis.names import qualified
from fixer.analysis.scopes import Scope, scope_of, scopes, statement_index
from fixer.context import FileContext
from fixer.nodes import subtree

Values = Optional[frozenset]
OPAQUE_STORES = ("setattr", "__dict__", "vars(")  # ways to store a field the analysis cannot follow
MAX_DEPTH = 4  # constructions passing fields of other configurations, followed this deep


def constant_values(ctx: FileContext, scope: Scope, expr: ast.expr, depth: int = 0) -> Values:
    """Every constant ``expr`` can hold in ``scope``; None when any path is unknown."""
    if isinstance(expr, ast.Constant):
        return frozenset({expr.value})
    if depth > MAX_DEPTH:
        return None
    if isinstance(expr, ast.Name):
        return _global_values(ctx, scope, expr.id, depth)
    owner = _owner(ctx, scope, expr.value) if isinstance(expr, ast.Attribute) else None
    if owner is None:
        return None
    home, cls, instance = owner
    if cls.bases or cls.keywords or not _stored_only_by(ctx, home, cls, expr.attr):
        return None
    if instance and not project_constructions(home, cls):
        return None  # instances made otherwise too (subclassed, passed on, a factory): unknown
    return _field_values(home, cls, expr.attr, instance, depth)


def _owner(ctx: FileContext, scope: Scope, receiver: ast.expr) -> Optional[tuple[FileContext, ast.ClassDef, bool]]:
    """(the class's file, the class, True) when ``receiver`` is an instance of a class of this or
    another project file; (..., False) when it names the class itself."""
    classes = {c.name: c for c in statement_index(ctx).classes if ctx.parent(c) is ctx.tree}
    if isinstance(receiver, ast.Name) and receiver.id in classes and not _rebound(ctx, receiver.id):
        return ctx, classes[receiver.id], False
    if isinstance(receiver, ast.Name) and receiver.id == scope.self_name and scope.class_node is not None:
        return ctx, scope.class_node, True
    root = receiver
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) and root.id not in classes and not _rebound(ctx, root.id):
        imported = imported_class(ctx, qualified(ctx, receiver) or "")  # Config.flag, settings.Config.flag
        if imported is not None:
            return imported[0], imported[1], False
    where, name = _holder(ctx, scope, receiver)
    found = path_instance(ctx, where, name) if name else None
    if found is not None:
        return ctx, found, True
    own = ctx
    if name and "." in name:  # self.cfg: what the class's one construction in the project gives it
        given = project_life_field(ctx, scope, receiver)
        own, where, name = (given[0], given[1], given[2].id) if given is not None and isinstance(given[2], ast.Name) else (ctx, where, None)
        found = path_instance(own, where, name) if name and own is not ctx else None
        if found is not None:
            return own, found, True  # a class of the constructing file
    imported = imported_instance_of(own, where, name) if name else None
    return (imported[0], imported[1], True) if imported is not None else None


def _holder(ctx: FileContext, scope: Scope, receiver: ast.expr) -> tuple[Scope, Optional[str]]:
    """The scope and dotted name of ``receiver`` (the module's when it reads a module-level name)."""
    if isinstance(receiver, ast.Name):
        return (scopes(ctx)[0] if _global(ctx, scope, receiver.id) else scope), receiver.id
    return scope, (ast.unparse(receiver) if isinstance(receiver, ast.Attribute) else None)


def _stored_only_by(ctx: FileContext, home: FileContext, cls: ast.ClassDef, attr: str) -> bool:
    """Only the class stores ``.attr`` in its file, the reading file, the files importing the class
    and the project files around both that name ``attr``, none of which stores fields in ways not
    followed (``setattr``, ``vars``, ``__dict__``)."""
    around = [*class_importers(home, cls), *neighbours_naming(home, attr), *neighbours_naming(ctx, attr)]
    others = {id(f): f for f in [ctx, *around] if os.path.abspath(f.path) != os.path.abspath(home.path)}
    if any(s in f.source for f in [home, *others.values()] for s in OPAQUE_STORES):
        return False
    return written_only_in(home, cls, attr) and not any(_may_store(f, cls, attr) for f in others.values())


def _may_store(ctx: FileContext, cls: ast.ClassDef, attr: str) -> bool:
    """A store to ``.attr`` in this file (not the class's) may change an instance of ``cls``: its
    receiver is not provably another object (the ``self`` of another class's method, or a name
    bound only to another class's construction)."""
    if not attribute_store_lines(ctx, attr):
        return False
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.Attribute) and node.attr == attr and not isinstance(node.ctx, ast.Load):
            scope = scope_of(ctx, node)
            receiver = node.value
            if isinstance(receiver, ast.Name) and receiver.id == scope.self_name and scope.class_node is not None:
                continue  # another class's own field
            other = path_instance(ctx, scope, receiver.id) if isinstance(receiver, ast.Name) else None
            if other is None or other.name == cls.name:
                return True
    return False


def _rebound(ctx: FileContext, name: str) -> bool:
    return name in ctx.memo("rebound_names", lambda: _bound_in(ctx.tree))


def _bound_in(node: ast.AST) -> frozenset[str]:
    """Names stored or deleted anywhere under ``node`` (nested functions too): one walk for every
    name asked, where each question walked the tree again."""
    return frozenset(n.id for n in subtree(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))


def _global(ctx: FileContext, scope: Scope, name: str) -> bool:
    """``name`` in ``scope`` is the module's: not a parameter, not bound there, never declared global."""
    if isinstance(scope.node, ast.Module):
        return False
    args = scope.node.args
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg] if a is not None}
    bound = name in ctx.memo(("bound_in", id(scope.node)), lambda: _bound_in(scope.node))
    declared = name in ctx.memo("names_declared_global", lambda: frozenset(g for n in subtree(ctx.tree) if isinstance(n, ast.Global) for g in n.names))
    return name not in params and not bound and not declared


def _global_values(ctx: FileContext, scope: Scope, name: str, depth: int) -> Values:
    """A module-level name every binding of the file gives a constant (``RETAIN = True``)."""
    if not (isinstance(scope.node, ast.Module) or _global(ctx, scope, name)):
        return None
    stores = sum(1 for n in ast.walk(ctx.tree) if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load))
    values = [a for a in statement_index(ctx).assigns if len(a.targets) == 1 and isinstance(a.targets[0], ast.Name) and a.targets[0].id == name]
    if not values or stores != len(values):
        return None  # bound otherwise too (a loop, a tuple, an augmented assignment, a parameter)
    module = scopes(ctx)[0]
    return _union(constant_values(ctx, module, v.value, depth + 1) for v in values)


def _field_values(ctx: FileContext, cls: ast.ClassDef, attr: str, instance: bool, depth: int) -> Values:
    body = _class_value(ctx, cls, attr)
    if not instance:
        return None if body is None or attr in attribute_writes(ctx, cls) else constant_values(ctx, scopes(ctx)[0], body, depth + 1)
    parts: list[Values] = []
    fields = _dataclass_fields(ctx, cls)
    if fields is not None and attr in fields:
        parts += _constructed(ctx, cls, attr, list(fields).index(attr), fields[attr], depth)
    elif body is not None:
        parts.append(constant_values(ctx, scopes(ctx)[0], body, depth + 1))
    for write in attribute_writes(ctx, cls).get(attr, []):
        parts += _written(ctx, cls, attr, write, depth)
    return _union(parts) if parts else None


def _written(ctx: FileContext, cls: ast.ClassDef, attr: str, write, depth: int) -> list[Values]:
    """What one method's store to ``self.attr`` gives it: a constant, or the ``__init__`` parameter
    it stores (what every construction passes for it, or its default)."""
    value = write.value
    if isinstance(value, ast.Constant) and isinstance(write.stmt, (ast.Assign, ast.AnnAssign)):
        return [frozenset({value.value})]
    param = init_parameter(ctx, cls, attr) if write.method.node.name == "__init__" else None
    if param is None:
        return [None]
    init = class_methods(ctx, cls)["__init__"]
    args = init.node.args
    positional = [a.arg for a in args.posonlyargs + args.args][1:]
    defaults = dict(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
    index = positional.index(param) if param in positional else -1
    return _constructed(ctx, cls, param, index, defaults.get(param), depth, init)


def _constructed(ctx: FileContext, cls: ast.ClassDef, param: str, index: int, default: Optional[ast.expr],
                 depth: int, init: Optional[Scope] = None) -> list[Values]:
    """What every construction of ``cls`` in the project passes for ``param`` (position ``index``
    among the positional parameters, -1 for keyword-only), or ``default`` where it passes none."""
    sites = project_constructions(ctx, cls)
    if not sites:
        return [None]
    found: list[Values] = []
    for own, scope, call in sites:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return [None]
        given = dict(bound_arguments(init, call)) if init is not None else {}
        if init is None:
            given = {k.arg: k.value for k in call.keywords} | ({param: call.args[index]} if 0 <= index < len(call.args) else {})
        value = given.get(param)
        if value is None and default is None:
            return [None]
        found.append(constant_values(own, scope, value, depth + 1) if value is not None
                     else constant_values(ctx, scopes(ctx)[0], default, depth + 1))
    return found


def _class_value(ctx: FileContext, cls: ast.ClassDef, attr: str) -> Optional[ast.expr]:
    """The value the class body gives ``attr`` (``attr = v``, ``attr: T = v``, a dataclass field's
    ``field(default=v)``); None when it gives none, more than one, or a default factory."""
    found = []
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in stmt.targets):
            found.append(stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == attr and stmt.value:
            found.append(_field_default(ctx, stmt.value))
    return found[0] if len(found) == 1 else None


def _field_default(ctx: FileContext, value: ast.expr) -> Optional[ast.expr]:
    if isinstance(value, ast.Call) and qualified(ctx, value.func) == "dataclasses.field":
        return next((k.value for k in value.keywords if k.arg == "default"), None)
    return value


def _dataclass_fields(ctx: FileContext, cls: ast.ClassDef) -> Optional[dict[str, Optional[ast.expr]]]:
    """A dataclass's init fields in order, each with its default (None: none); None if ``cls`` is
    not a plain dataclass (``@dataclass``/``@dataclass(...)`` and no ``__init__`` of its own)."""
    decorators = [d.func if isinstance(d, ast.Call) else d for d in cls.decorator_list]
    if len(decorators) != 1 or qualified(ctx, decorators[0]) != "dataclasses.dataclass" or "__init__" in class_methods(ctx, cls):
        return None
    fields: dict[str, Optional[ast.expr]] = {}
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if "ClassVar" in ast.unparse(stmt.annotation) or _keyword(stmt.value, "init") is not None:
                continue  # not a parameter of __init__ (init=False keeps its default for life)
            fields[stmt.target.id] = _field_default(ctx, stmt.value) if stmt.value is not None else None
    return fields


def _keyword(value: Optional[ast.expr], name: str) -> Optional[ast.expr]:
    return next((k.value for k in value.keywords if k.arg == name), None) if isinstance(value, ast.Call) else None


def _union(parts) -> Values:
    found: set = set()
    for part in parts:
        if part is None:
            return None
        found |= part
    return frozenset(found)
