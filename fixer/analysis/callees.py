"""The function a call runs, when the project shows it: ``helper(...)`` and ``self.method(...)``
in this file, ``obj.method(...)`` when every binding of ``obj`` constructs one class of this file
(``instance_class``) or of another project file (``imported_instance_of``), or ``obj`` is a
parameter to which every call of its function passes an instance of one class of this file
(``call_sites.instance_parameters``), ``self.field.method(...)`` when the class stores ``Cls(...)``
there (``field_method``) or the object holds such an instance given at its construction in
``field`` for life (``call_sites.field_instance``), and a function imported from another project
file (imported_definitions). A parameter every call passes an instance of one class of another project
file (``_given_imported``: ``call_sites.instance_parameters`` asked of that class), and a field the
class's one construction gives such an instance for life (``_given_imported_field``), run that
class's method. None when unknown."""

from __future__ import annotations

import ast
import os
from typing import Optional

from fixer.analysis.call_sites import (
    argument_of,
    field_instance,
    function_call_sites,
    holds_instance,
    instance_parameters,
    life_field,
    parameter_position,
)
from fixer.analysis.class_model import attribute_writes, class_methods
from fixer.analysis.imported_definitions import imported_class, imported_function
from fixer.analysis.names import dotted, last_name, qualified
from fixer.analysis.scopes import Scope, scope_nodes, scope_of, scopes, statement_index
from fixer.context import FileContext


def called_function(ctx: FileContext, scope: Scope, func: ast.expr, imported: bool = True) -> Optional[Scope]:
    """The function a call runs, when it is in this file (``helper(...)``, ``self.method(...)``)
    or (with ``imported``) imported from another project file; None if unknown."""
    name = dotted(func)
    if name is None:
        return None
    head, _, attr = name.partition(".")
    instance_of = None
    for candidate in _functions_named(ctx).get(attr or head, ()):
        node = candidate.node
        if not attr and node.name == head and candidate.class_node is None and ctx.parent(node) is ctx.tree:
            return candidate
        if attr and "." not in attr and head == scope.self_name and node.name == attr and candidate.class_node is scope.class_node:
            return candidate
        if attr and "." not in attr and head != scope.self_name and candidate.class_node is not None:
            instance_of = instance_of or [_instance_of(ctx, scope, head)]
            if candidate.class_node is instance_of[0] or instance_of[0] is None and holds_instance(ctx, scope, head, candidate.class_node):
                return candidate
    if head == scope.self_name and attr.count(".") == 1:  # self.core.step(...): Core.step
        if not isinstance(func, ast.Attribute):
            return field_method(ctx, scope, *attr.split("."))
        return field_method(ctx, scope, *attr.split(".")) or _given_field_method(ctx, scope, func) or _given_imported_field(ctx, scope, func)
    if not imported:
        return None
    if attr and "." not in attr and head != scope.self_name:
        return _imported_method(ctx, scope, head, attr)
    return imported_function(ctx, func)


def _given_field_method(ctx: FileContext, scope: Scope, func: ast.Attribute) -> Optional[Scope]:
    """``self.field.method``: the method of the class of this file whose instance the object
    holds in ``field`` for life (``call_sites.field_instance``)."""
    found = [c for c in _functions_named(ctx).get(func.attr, ())
             if c.class_node is not None and c.self_name and ctx.parent(c.node) is c.class_node and field_instance(ctx, scope, func.value, c.class_node)]
    return found[0] if len(found) == 1 else None


def _given_imported_field(ctx: FileContext, scope: Scope, func: ast.Attribute) -> Optional[Scope]:
    """``self.field.method``: the method of the class of another project file whose instance the
    class's one construction gives for ``field``, kept for life (``call_sites.life_field``)."""
    given = life_field(ctx, scope, func.value)
    if not isinstance(given, ast.Name):
        return None
    return _method_of(imported_instance_of(ctx, scope_of(ctx, given), given.id), func.attr)


def _imported_method(ctx: FileContext, scope: Scope, name: str, method: str) -> Optional[Scope]:
    """``name.method`` when ``name`` holds an instance of a class of another project file."""
    return _method_of(imported_instance_of(ctx, scope, name), method)


def _method_of(known: Optional[tuple[FileContext, ast.ClassDef]], method: str) -> Optional[Scope]:
    if known is None:
        return None
    other, cls = known
    found = [s for s in scopes(other) if s.class_node is cls and s.self_name and s.node.name == method and other.parent(s.node) is cls]
    return found[0] if len(found) == 1 else None


def _instance_of(ctx: FileContext, scope: Scope, name: str) -> Optional[ast.ClassDef]:
    """The class of this file that ``name`` holds an instance of: every binding of it in the scope
    (or, when the scope binds it nowhere, in the module) is ``Cls(...)`` of one module-level class."""
    def compute() -> Optional[ast.ClassDef]:
        classes = {id(c): c for c in (instance_class(ctx, v) for v in _bound_values(ctx, scope, name) or [None])}
        return next(iter(classes.values())) if len(classes) == 1 else None

    return ctx.memo(("instance_of", id(scope.node), name), compute)


def instance_class(ctx: FileContext, value: Optional[ast.expr]) -> Optional[ast.ClassDef]:
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return None
    found = [c for c in statement_index(ctx).classes if c.name == value.func.id and ctx.parent(c) is ctx.tree]
    return found[0] if len(found) == 1 else None


def field_method(ctx: FileContext, scope: Scope, field: str, method: str) -> Optional[Scope]:
    """``self.<field>.<method>(...)`` runs ``Cls.method`` when every write of ``self.<field>`` in the
    class is ``self.<field> = Cls(...)`` of one class of this file (a submodule built in ``__init__``,
    a memory object): the program constructs it there. Any other write leaves the callee unknown."""
    if scope.class_node is None or not scope.self_name:
        return None
    writes = attribute_writes(ctx, scope.class_node).get(field, [])
    classes = {id(c): c for c in (instance_class(ctx, w.value) for w in writes)}
    if len(classes) != 1 or None in classes.values():
        return None
    found = class_methods(ctx, next(iter(classes.values()))).get(method)
    return found if found is not None and found.self_name else None


def imported_instance_of(ctx: FileContext, scope: Scope, name: str) -> Optional[tuple[FileContext, ast.ClassDef]]:
    """The class of another project file that ``name`` holds an instance of: every binding of it
    (as ``_instance_of`` finds them) is ``Cls(...)`` of one imported class."""
    if _parameter(scope, name):
        return _given_imported(ctx, scope, name)
    if name not in names_constructing_imported(ctx):
        return None  # cheap: no assignment of the file gives the name an imported class's instance

    def compute() -> Optional[tuple[FileContext, ast.ClassDef]]:
        values = _bound_values(ctx, scope, name)
        if not values or not all(isinstance(v, ast.Call) for v in values):
            return None
        found = [imported_class(ctx, qualified(ctx, v.func) or "") for v in values]
        if any(k is None for k in found) or len({(os.path.abspath(k[0].path), k[1].name) for k in found}) != 1:
            return None
        return found[0]

    return ctx.memo(("imported_instance_of", id(scope.node), name), compute)


def _parameter(scope: Scope, name: str) -> bool:
    args = getattr(scope.node, "args", None)
    return args is not None and name in {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}


def _given_imported(ctx: FileContext, scope: Scope, name: str) -> Optional[tuple[FileContext, ast.ClassDef]]:
    """The class of another project file whose instance every call of a plain function passes for
    its parameter ``name`` (``call_sites.instance_parameters`` asked of the class the first call
    gives); None on recursion."""
    computing = ("given_imported: computing", id(scope.node), name)
    if computing in ctx.cache or scope.class_node is not None:
        return None

    def compute() -> Optional[tuple[FileContext, ast.ClassDef]]:
        ctx.cache[computing] = True
        try:
            sites, position = function_call_sites(ctx, scope), parameter_position(scope, name)
            call = sites[0][2] if sites and position is not None else None
            argument = argument_of(call, name, position) if call is not None else None
            own, caller = sites[0][:2] if call is not None else (ctx, scope)
            known = None
            if isinstance(argument, ast.Name):
                known = imported_instance_of(own, caller, argument.id)
            elif isinstance(argument, ast.Call):
                known = imported_class(own, qualified(own, argument.func) or "")
            return known if known is not None and name in instance_parameters(ctx, scope, known[1], known[0]) else None
        finally:
            del ctx.cache[computing]

    return ctx.memo(("given_imported", id(scope.node), name), compute)


def names_constructing_imported(ctx: FileContext) -> frozenset[str]:
    """Names some assignment of the file binds to ``Cls(...)`` of an imported CapWords name: those
    that may hold an instance of a class of another project file (one pass over the file's
    assignments, reading no other file)."""
    return _imported_constructions(ctx)[0]


def constructed_imports(ctx: FileContext) -> frozenset[str]:
    """The imported names (the first part of ``Cls`` or ``mod.Cls``) some assignment of the file
    calls as ``Cls(...)`` with a CapWords name, whatever it assigns to."""
    return _imported_constructions(ctx)[1]


def _imported_constructions(ctx: FileContext) -> tuple[frozenset[str], frozenset[str]]:
    def compute() -> tuple[frozenset[str], frozenset[str]]:
        imported = {(a.asname or a.name).partition(".")[0] for i in statement_index(ctx).imports for a in i.names}
        names: set[str] = set()
        roots: set[str] = set()
        for a in statement_index(ctx).assigns if imported else ():
            root = (dotted(a.value.func) or "").partition(".")[0] if isinstance(a.value, ast.Call) else ""
            if root in imported and (last_name(a.value.func) or "")[:1].isupper():  # cheap: CapWords, as classes are named
                roots.add(root)
                names |= {t.id for t in a.targets if isinstance(t, ast.Name)}
        return frozenset(names), frozenset(roots)

    return ctx.memo("imported_constructions", compute)


def _bound_values(ctx: FileContext, scope: Scope, name: str) -> Optional[list[Optional[ast.expr]]]:
    """The values ``name`` is bound to in the scope, or (when the scope binds it nowhere) in the
    module; None for a parameter or a ``global``/``nonlocal`` name; a binding that is not a plain
    assignment gives None in the list."""

    def bound_values(where: Scope) -> Optional[list[Optional[ast.expr]]]:
        values: list[Optional[ast.expr]] = []
        for node in scope_nodes(where):
            if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
                return None
            if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
                parent = ctx.parent(node)
                values.append(parent.value if isinstance(parent, ast.Assign) and node in parent.targets else None)
        return values

    args = getattr(scope.node, "args", None)
    if args is not None and name in {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} | {a.arg for a in (args.vararg, args.kwarg) if a}:
        return None
    values = bound_values(scope)
    if values == [] and not isinstance(scope.node, ast.Module):
        values = bound_values(scopes(ctx)[0])
    return values


def _functions_named(ctx: FileContext) -> dict[str, list[Scope]]:
    def compute() -> dict[str, list[Scope]]:
        found: dict[str, list[Scope]] = {}
        for scope in scopes(ctx):
            if not isinstance(scope.node, ast.Module):
                found.setdefault(scope.node.name, []).append(scope)
        return found

    return ctx.memo("functions_named", compute)
