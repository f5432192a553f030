"""Methods of an object held in a field: ``self.core.step(...)`` runs ``Core.step`` when every
write of ``self.core`` in the class is ``self.core = Core(...)`` of one class of this file (a
submodule built in ``__init__``, an optimiser wrapper, a memory object). The class is known because
the program constructs it there, never from a name; any other write (a parameter stored, a
``del``, a value from elsewhere) leaves the callee unknown."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.class_model import attribute_writes, class_methods
from fixer.analysis.scopes import Scope, statement_index
from fixer.context import FileContext


def field_method(ctx: FileContext, scope: Scope, field: str, method: str) -> Optional[Scope]:
    """The method ``method`` of the class ``self.<field>`` of ``scope``'s class always holds."""
    if scope.class_node is None or not scope.self_name:
        return None
    held = field_class(ctx, scope.class_node, field)
    if held is None:
        return None
    found = class_methods(ctx, held).get(method)
    return found if found is not None and found.self_name else None


def field_class(ctx: FileContext, cls: ast.ClassDef, field: str) -> Optional[ast.ClassDef]:
    """The one module-level class of this file every write of ``self.<field>`` constructs."""
    writes = attribute_writes(ctx, cls).get(field, [])
    if not writes:
        return None
    classes = {id(c): c for c in (constructed_class(ctx, w.value) for w in writes)}
    if len(classes) != 1 or None in classes.values():
        return None
    return next(iter(classes.values()))


def constructed_class(ctx: FileContext, value: Optional[ast.expr]) -> Optional[ast.ClassDef]:
    """The class of this file a call ``Cls(...)`` instantiates."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return None
    found = [c for c in statement_index(ctx).classes if c.name == value.func.id and ctx.parent(c) is ctx.tree]
    return found[0] if len(found) == 1 else None
