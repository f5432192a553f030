"""Containers and the objects' fields that hold them: the class a module-level object
instantiates (``policy = Policy()``, in this file or another project file), what its ``__init__``
sets a field to, whether a value is a container (a list, dict or deque, or a tensor buffer made
without gradient) and whether code other than the loop empties or replaces it (the author
manages its lifetime)."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.carried_shape import class_init_values
from fixer.analysis.graph import CREATION
from fixer.analysis.names import dotted, last_name, qualified
from fixer.analysis.imported_definitions import imported_class
from fixer.analysis.scopes import Scope, scope_nodes, scopes, statement_index
from fixer.context import FileContext
from fixer.nodes import walk


RESETS = frozenset({"clear"})


def object_class(ctx: FileContext, owner: str) -> Optional[ast.ClassDef]:
    """The class of this file a module-level ``owner = Cls(...)`` instantiates."""
    call = _module_construction(ctx, owner)
    return {c.name: c for c in statement_index(ctx).classes}.get(dotted(call.func) or "") if call is not None else None


def _module_construction(ctx: FileContext, owner: str) -> Optional[ast.Call]:
    """The call of the first module-level ``owner = f(...)`` (those of every owner found once a file)."""
    first = ctx.memo("module_constructions", lambda: {
        dotted(t): s.value for s in reversed(ctx.tree.body) if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call) for t in s.targets})
    return first.get(owner)


def project_object_class(ctx: FileContext, owner: str) -> Optional[tuple[FileContext, ast.ClassDef]]:
    """``object_class``, or the class of another project file it instantiates (``policy =
    Policy()`` after ``from models import Policy``), with the file defining it."""
    cls = object_class(ctx, owner)
    if cls is not None:
        return ctx, cls
    call = _module_construction(ctx, owner)
    return imported_class(ctx, qualified(ctx, call.func) or "") if call is not None else None


def field_initials(home: FileContext, cls: ast.ClassDef, attr: str) -> list[ast.expr]:
    """What ``__init__`` of ``cls`` (in its file ``home``) sets ``self.attr`` to."""
    return [v for s in scopes(home) if s.class_node is cls and s.node.name == "__init__" for k, v in class_init_values(home, s, "__init__").items() if k == f"{s.self_name}.{attr}"]


def object_manages(ctx: FileContext, scope: Scope, name: str, found: tuple[FileContext, ast.ClassDef]) -> bool:
    """``managed_elsewhere`` for the field ``name`` of an object of the class ``found`` (file,
    class): by this file's code or by the class's methods in its own file."""
    home, cls = found
    return managed_elsewhere(ctx, scope, name, cls) or home is not ctx and managed_elsewhere(home, scope, name, cls, methods_only=True)


def is_empty_container(value: Optional[ast.expr]) -> bool:
    if isinstance(value, (ast.List, ast.Dict)):
        return not (value.elts if isinstance(value, ast.List) else value.keys)
    return isinstance(value, ast.Call) and not value.args and (dotted(value.func) or "").split(".")[-1] in ("list", "dict", "deque")


def managed_elsewhere(ctx: FileContext, scope: Scope, name: str, cls: Optional[ast.ClassDef] = None, methods_only: bool = False) -> bool:
    """A method other than ``__init__`` (or code outside the class, unless ``methods_only``) empties
    or replaces the container: the author manages its lifetime."""
    attr = name.split(".", 1)[1]
    cls = cls or scope.class_node
    for other in scopes(ctx):
        if other is scope and scope.self_name or other.class_node is cls and cls is not None and other.node.name == "__init__":
            continue
        if methods_only and other.class_node is not cls:
            continue
        for node in scope_nodes(other):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == attr for t in node.targets):
                return True
            if isinstance(node, ast.Delete) and any(isinstance(b, ast.Attribute) and b.attr == attr for t in node.targets for b in walk(t)):
                return True
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RESETS | {"pop", "popleft"}:
                if isinstance(node.func.value, ast.Attribute) and node.func.value.attr == attr:
                    return True
    return False


def is_container(ctx: FileContext, value: Optional[ast.expr]) -> bool:
    if isinstance(value, (ast.List, ast.Dict)):
        return True
    if isinstance(value, ast.Call):
        return (last_name(value.func) or "") in ("list", "dict", "deque", "OrderedDict", "defaultdict") or is_tensor_buffer(ctx, value)
    return False


def is_tensor_buffer(ctx: FileContext, value: Optional[ast.expr]) -> bool:
    """A tensor made by torch without gradient (``torch.zeros(n, d)``): item stores into it
    (``bank[i] = feat``) record an in-place copy that joins the stored value's graph."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("to", "cuda", "cpu", "float", "double", "half"):
        value = value.func.value
    name = qualified(ctx, value.func) if isinstance(value, ast.Call) else None
    return bool(name and CREATION.match(name)) and not any(k.arg == "requires_grad" for k in value.keywords)
