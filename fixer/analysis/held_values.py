"""Values read back from the holder the code put them in, as value flow.

``out["loss"]`` after ``out = {"loss": loss}``, ``out[0]`` after ``out = (loss,)`` and ``out.loss``
after ``out = Output(loss)`` (a class of this file whose ``__init__`` keeps the parameter, see
class_model) read the value of ``loss``. ``held_name(ctx, scope, read)`` gives a Name standing for
that value, positioned at the read (its text is the read's), when the holder's only reaching
binding is that literal or construction, nothing stores into or through the holder in the scope
(nor passes it to a call; a dict or tuple may not have a method called on it either), and the
stored name has the same reaching bindings at the read as at the store. Otherwise None: a holder
that may have changed yields no fact. ``held_attribute`` answers the same for a dotted name,
``held_receiver`` for the receiver of a method call (``out["scaler"].backward(loss)`` calls
``scaler.backward``).

The holder may be a field of the method's own object (``self.out["loss"]`` after ``self.out =
{"loss": loss}`` in the same method): then also no method of that object may run in between (nor
the object be handed to a call), since a method could store into the field. A call of a field
(``self.critic(x)``) is no method only when the class has no base and defines no method of that
name."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.assignments import scope_assignments
from fixer.analysis.callees import instance_class
from fixer.analysis.class_model import class_methods, constructor_field
from fixer.analysis.names import dotted
from fixer.analysis.scopes import Scope, scope_nodes
from fixer.context import FileContext

READING_METHODS = frozenset({"get", "items", "keys", "values", "copy", "index", "count"})


def held_name(ctx: FileContext, scope: Scope, read: ast.expr) -> Optional[ast.Name]:
    if not isinstance(read, (ast.Subscript, ast.Attribute)) or _holder(scope, read.value) is None:
        return None
    if isinstance(read, ast.Subscript) and not isinstance(read.slice, ast.Constant):
        return None
    return ctx.memo(("held_name", id(read)), lambda: _resolve(ctx, scope, read))


def held_receiver(ctx: FileContext, scope: Scope, func: ast.expr) -> ast.expr:
    """A called method whose receiver is read back from a holder (``out["scaler"].backward`` after
    ``out = {"scaler": scaler}``) as the method of the name it holds (``scaler.backward``, at the
    read), so that the callee is the held object's; ``func`` itself otherwise."""
    if not isinstance(func, ast.Attribute) or held_name(ctx, scope, func.value) is None:
        return func

    def compute() -> ast.expr:
        held = held_name(ctx, scope, func.value)
        method = ast.copy_location(ast.Attribute(value=held, attr=func.attr, ctx=ast.Load()), func)
        ctx.set_parent(method, ctx.parent(func))
        ctx.set_parent(held, method)
        return method

    return ctx.memo(("held_receiver", id(func)), compute)


def _holder(scope: Scope, node: ast.expr) -> Optional[str]:
    """``out``, or ``self.out`` (a field of the method's own object): a holder whose bindings the scope shows."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and scope.self_name and node.value.id == scope.self_name:
        return f"{node.value.id}.{node.attr}"
    return None


def _resolve(ctx: FileContext, scope: Scope, read: ast.expr) -> Optional[ast.Name]:
    stored = _stored_name(ctx, scope, _holder(scope, read.value), read, read)
    if stored is None:
        return None
    name = ast.copy_location(ast.Name(id=stored, ctx=ast.Load()), read)
    parent = ctx.parent(read)
    if parent is not None:
        ctx.set_parent(name, parent)
    return name


def held_attribute(ctx: FileContext, scope: Scope, owner: str, at: ast.AST) -> Optional[str]:
    """``trainer.optimizer`` (a dotted name, read at ``at``) -> ``optimizer`` when ``trainer =
    Trainer(optimizer, ...)`` keeps it for life; None otherwise."""
    holder, _, attr = owner.partition(".")
    if not attr or "." in attr:
        return None
    read = ast.Attribute(value=ast.Name(id=holder, ctx=ast.Load()), attr=attr, ctx=ast.Load())
    return ctx.memo(("held_attribute", owner, id(at)), lambda: _stored_name(ctx, scope, holder, read, at))


def _stored_name(ctx: FileContext, scope: Scope, holder: str, read: ast.expr, at: ast.AST) -> Optional[str]:
    bindings = scope_assignments(ctx, scope)
    defs = bindings.reaching(holder, at)
    if len(defs) != 1 or not isinstance(defs[0][1], (ast.Dict, ast.Tuple, ast.Call)):
        return None
    stmt, value = defs[0]
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], (ast.Name, ast.Attribute)) and dotted(stmt.targets[0]) == holder):
        return None
    stored_into, called, handed = _touched(ctx, scope)
    if holder in stored_into or isinstance(read, ast.Subscript) and holder in called:
        return None  # an object's methods can change only what its class model says they write
    owner = holder.partition(".")[0] if "." in holder else None
    if owner is not None and (owner in handed or _own_method_called(ctx, scope, owner)):
        return None  # a field: a method of its object (or a call given the object) may store into it
    stored = _stored(ctx, value, read, holder in called)
    if not isinstance(stored, ast.Name) or stored.id == holder:
        return None
    if [id(s) for s, _ in bindings.reaching(stored.id, at)] != [id(s) for s, _ in bindings.reaching(stored.id, stmt)]:
        return None  # the stored name was rebound between the store and the read
    return stored.id


def _stored(ctx: FileContext, value: Optional[ast.expr], read: ast.expr, methods_called: bool) -> Optional[ast.expr]:
    """The element of the literal or construction ``value`` that ``read`` reads. An object whose
    methods are called must have a class without bases: an inherited method could rebind it."""
    if isinstance(read, ast.Subscript):
        key = read.slice.value
        if isinstance(value, ast.Dict) and all(isinstance(k, ast.Constant) for k in value.keys):
            found = [v for k, v in zip(value.keys, value.values) if k.value == key]
            return found[-1] if found else None
        if isinstance(value, ast.Tuple) and isinstance(key, int) and not isinstance(key, bool) and -len(value.elts) <= key < len(value.elts):
            if not any(isinstance(e, ast.Starred) for e in value.elts):
                return value.elts[key]
        return None

    cls = instance_class(ctx, value)
    if cls is None or methods_called and any(not (isinstance(b, ast.Name) and b.id == "object") for b in cls.bases):
        return None
    param = constructor_field(ctx, cls, read.attr)
    if param is None:
        return None
    init = class_methods(ctx, cls)["__init__"].node
    params = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
    if any(isinstance(a, ast.Starred) for a in value.args) or any(k.arg is None for k in value.keywords):
        return None
    bound = dict(zip(params, value.args)) | {k.arg: k.value for k in value.keywords}
    return bound.get(param)


def _own_method_called(ctx: FileContext, scope: Scope, owner: str) -> bool:
    """A call ``self.m(...)`` in the scope that may run a method of the object: the class has a
    base (an inherited method), or defines ``m``."""
    cls = scope.class_node
    methods = class_methods(ctx, cls) if cls is not None else {}
    for node in scope_nodes(scope):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and dotted(node.func.value) == owner:
            if cls is None or cls.bases or cls.keywords or node.func.attr in methods:
                return True
    return False


def _touched(ctx: FileContext, scope: Scope) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(names stored into, through, deleted from or passed to a call; names a method is called on,
    other than a reading one; names passed to a call) in the scope."""

    def compute() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
        stored, called, handed = set(), set(), set()
        for node in scope_nodes(scope):
            if isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(node.ctx, ast.Load):
                base = node.value
                while isinstance(base, (ast.Subscript, ast.Attribute)):
                    stored.add(dotted(base) or "")  # ``self.out["k"] = v`` stores into ``self.out`` (and ``self``)
                    base = base.value
                if isinstance(base, ast.Name):
                    stored.add(base.id)
            elif isinstance(node, ast.Call):
                arguments = [*node.args, *(k.value for k in node.keywords)]
                handed |= {name for a in arguments if isinstance(a, (ast.Name, ast.Attribute)) and (name := dotted(a))}
                handed |= {a.value.id for a in node.args if isinstance(a, ast.Starred) and isinstance(a.value, ast.Name)}
                func = node.func
                if isinstance(func, ast.Attribute) and isinstance(func.value, (ast.Name, ast.Attribute)) and func.attr not in READING_METHODS:
                    called.add(dotted(func.value) or "")
        return frozenset(stored | handed), frozenset(called), frozenset(handed)

    return ctx.memo(("touched_holders", id(scope.node)), compute)
