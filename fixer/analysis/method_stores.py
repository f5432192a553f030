"""Fields a call writes through the method it runs: ``state.update(h)`` runs ``State.update``,
whose body assigns ``self.hidden = hidden``, so the call stores ``h`` in ``state.hidden`` as
``state.hidden = h`` would; ``state.cut()`` running ``self.hidden = self.hidden.detach()`` writes
``state.hidden`` with a value of its own.

Only a method the project shows (``callees.called_function``: of this file or of another project
file), called as a statement of its own. Every field the method writes is reported (an
assignment, an augmented one, a ``del``, or a write of a method of its own object it calls, read
as deep as MAX_DEPTH); its value is the argument only where the method's own body stores one of
its parameters, never rebound, in a statement that runs on every call, and only the last write of
the field; any other write has no value here (whatever it stores, it is not the caller's value).
A method that calls a method of its object the project does not show writes nothing known: the
call is left out, as a call of an unknown method always was."""

from __future__ import annotations

import ast
from typing import NamedTuple, Optional

from fixer.analysis.arguments import bound_arguments, parameters
from fixer.analysis.callees import called_function
from fixer.analysis.class_model import attribute_writes, class_methods
from fixer.analysis.names import dotted
from fixer.analysis.scopes import Scope, scope_nodes
from fixer.context import FileContext

MAX_DEPTH = 3  # methods of the object a method calls, followed this deep


class FieldWrite(NamedTuple):
    name: str  # the field as the caller spells it: ``state.hidden``
    value: Optional[ast.expr]  # the caller's argument the method stores there; None: a value of the method's own
    surely: bool  # written on every call (a statement of the method's own body)


def method_stores(ctx: FileContext, scope: Scope, stmt: ast.AST) -> list[FieldWrite]:
    """What the statement ``receiver.method(...)`` of ``scope`` writes in the receiver's fields."""
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return []
    receiver = dotted(call.func.value)
    callee = called_function(ctx, scope, call.func) if receiver is not None else None
    if callee is None or callee.self_name is None or callee.node is scope.node:
        return []
    writes = _field_writes(callee, MAX_DEPTH)
    arguments = dict(bound_arguments(callee, call))
    return [FieldWrite(f"{receiver}.{field}", arguments.get(param) if param else None, surely)
            for field, (param, surely) in sorted((writes or {}).items())]


def _field_writes(method: Scope, depth: int) -> Optional[dict[str, tuple[Optional[str], bool]]]:
    """field -> (the parameter the method stores there on every call, or None; whether every call
    writes it); None when the method calls a method of its object that cannot be read. The
    method's own writes are its class's ``attribute_writes``."""
    ctx, self_name = method.ctx, method.self_name
    if ctx is None or self_name is None or method.class_node is None:
        return None
    own, nodes = set(parameters(method)), scope_nodes(method)
    rebound = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    events: list[tuple[tuple[int, int], dict[str, tuple[Optional[str], bool]]]] = []  # in source order: the last write wins
    for field, found in attribute_writes(ctx, method.class_node).items():
        for write in (w for w in found if w.method.node is method.node):
            stmt = write.stmt  # (an augmented store is no store of a parameter as it is)
            value = stmt.value if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Attribute) else None
            param = value.id if isinstance(value, ast.Name) and value.id in own and value.id not in rebound else None
            events.append(((stmt.lineno, stmt.col_offset), {field: (param if write.every_call else None, write.every_call)}))
    for node in nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == self_name:
            inner = class_methods(ctx, method.class_node).get(node.func.attr) if depth > 0 else None
            found = _field_writes(inner, depth - 1) if inner is not None and inner.node is not method.node else None
            if found is None:
                return None
            events.append(((node.lineno, node.col_offset), {field: (None, False) for field in found}))
    writes: dict[str, tuple[Optional[str], bool]] = {}
    for _, written in sorted(events, key=lambda e: e[0]):
        writes.update(written)
    return writes
