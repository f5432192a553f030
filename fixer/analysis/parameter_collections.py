"""Collections of trainable parameters, and what a ``for`` loop over one binds.

``m.parameters()`` yields parameters, ``m.named_parameters()`` (name, parameter) pairs;
``list(...)``/``tuple(...)``, a list display and a comprehension keep what their elements are, a
tuple display its parts in place. A name holds what every assignment reaching it holds, a
parameter what every call of its function in this file passes; a field of ``self`` what every
write of its class stores in it (``self.groups = []``, ``self.groups.append((list(ps), l2))``),
when no code outside the class writes it.

A shape is ``PARAMETER``, ``Items(shape)`` (a collection of elements of that shape; ``EMPTY`` when
only empty ones were seen) or ``Parts(shapes)`` (a tuple); None is "not known" (data,
numbers, anything else), never a guess. ``loop_element(ctx, scope, loop, name)`` is the shape of
the loop target ``name`` binds."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional, Union

from fixer.analysis.arguments import bound_arguments, parameters
from fixer.analysis.assignments import scope_assignments
from fixer.analysis.call_sites import call_sites, uses_of
from fixer.analysis.class_model import attribute_writes, class_methods
from fixer.analysis.names import dotted
from fixer.analysis.scopes import Scope, scope_nodes
from fixer.context import FileContext
from fixer.analysis.vocabulary import SEQUENCE_ADDS

PARAMETER, NOTHING = "parameter", "nothing"


@dataclass(frozen=True)
class Items:
    element: Optional["Shape"]


@dataclass(frozen=True)
class Parts:
    parts: tuple[Optional["Shape"], ...]


Shape = Union[str, Items, Parts]
EMPTY = Items(NOTHING)


def loop_element(ctx: FileContext, scope: Scope, loop: ast.AST, name: str) -> Optional[Shape]:
    """The shape of what the loop's target ``name`` is bound to on each iteration."""
    if not isinstance(loop, (ast.For, ast.AsyncFor)):
        return None
    return _Shapes(ctx).target(scope, loop.target, loop.iter, name, set())


class _Shapes:
    def __init__(self, ctx: FileContext):
        self.ctx = ctx
        self.bound: list[dict[str, Optional[Shape]]] = []  # comprehension variables

    def target(self, scope: Scope, target: ast.expr, iterable: ast.expr, name: str, seen: set) -> Optional[Shape]:
        collection = self.shape(scope, iterable, seen)
        path = _path(target, name)
        if not isinstance(collection, Items) or path is None:
            return None
        return _part(collection.element, path)

    def shape(self, scope: Scope, expr: ast.expr, seen: set) -> Optional[Shape]:
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not expr.args:
            if expr.func.attr == "parameters":
                return Items(PARAMETER)
            if expr.func.attr == "named_parameters":
                return Items(Parts((None, PARAMETER)))
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("list", "tuple") \
                and len(expr.args) == 1 and not expr.keywords:
            inner = self.shape(scope, expr.args[0], seen)
            return inner if isinstance(inner, Items) else None
        if isinstance(expr, ast.Tuple):
            return Parts(tuple(self.shape(scope, e, seen) for e in expr.elts))
        if isinstance(expr, ast.List):
            return _join_all(Items(self.shape(scope, e, seen)) for e in expr.elts) if expr.elts else EMPTY
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
            return self._comprehension(scope, expr, seen)
        if isinstance(expr, ast.Name):
            return self._name(scope, expr.id, expr, seen)
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == scope.self_name:
            return self._field(scope, expr.attr, seen)
        return None

    def _comprehension(self, scope: Scope, expr: ast.expr, seen: set) -> Optional[Shape]:
        bound: dict[str, Optional[Shape]] = {}
        self.bound.append(bound)
        try:
            for generator in expr.generators:
                names = [n.id for n in ast.walk(generator.target) if isinstance(n, ast.Name)]
                bound.update({n: self.target(scope, generator.target, generator.iter, n, seen) for n in names})
            return Items(self.shape(scope, expr.elt, seen))
        finally:
            self.bound.pop()

    def _name(self, scope: Scope, name: str, at: ast.AST, seen: set) -> Optional[Shape]:
        for bound in reversed(self.bound):
            if name in bound:
                return bound[name]
        key = (id(scope.node), name)
        if key in seen:
            return None  # a cycle: nothing is concluded from it
        seen.add(key)
        try:
            defs = scope_assignments(self.ctx, scope).reaching(name, at)
            if defs:
                return _join_all(self._definition(scope, stmt, value, name, seen) for stmt, value in defs)
            if not isinstance(scope.node, ast.Module) and name in parameters(scope):
                return self._passed(scope, name, seen)
            return None
        finally:
            seen.discard(key)

    def _definition(self, scope: Scope, stmt: ast.AST, value: Optional[ast.expr], name: str, seen: set) -> Optional[Shape]:
        if value is None and isinstance(stmt, (ast.For, ast.AsyncFor)):
            return self.target(scope, stmt.target, stmt.iter, name, seen)
        if isinstance(stmt, ast.Assign) and value is not None:
            return self.shape(scope, value, seen)
        return None

    def _passed(self, scope: Scope, name: str, seen: set) -> Optional[Shape]:
        """What every call of the function in this file passes to ``name`` (a default: not known)."""
        shapes = []
        for caller, call in call_sites(self.ctx, scope):
            argument = dict(bound_arguments(scope, call)).get(name) if call is not None else None
            if argument is None:
                return None
            shapes.append(self.shape(caller, argument, seen))
        return _join_all(shapes) if shapes else None

    def _field(self, scope: Scope, attr: str, seen: set) -> Optional[Shape]:
        """What the class stores in ``self.attr``: its assignments and the elements added to it."""
        cls = scope.class_node
        key = (id(cls), attr)
        if cls is None or key in seen or _written_outside(self.ctx, cls, attr):
            return None
        seen.add(key)
        try:
            shapes = []
            for write in attribute_writes(self.ctx, cls).get(attr, []):
                if not isinstance(write.stmt, ast.Assign) or write.value is None:
                    return None
                shapes.append(self.shape(write.method, write.value, seen))
            for method, call in _additions(self.ctx, cls, attr):
                if call.func.attr == "extend":
                    shapes.append(self.shape(method, call.args[-1], seen))
                else:
                    shapes.append(Items(self.shape(method, call.args[-1], seen)))
            return _join_all(shapes) if shapes else None
        finally:
            seen.discard(key)


def _additions(ctx: FileContext, cls: ast.ClassDef, attr: str) -> list[tuple[Scope, ast.Call]]:
    found = []
    for method in class_methods(ctx, cls).values():
        for node in scope_nodes(method):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SEQUENCE_ADDS \
                    and dotted(node.func.value) == f"{method.self_name}.{attr}" and node.args:
                found.append((method, node))
    return found


def _written_outside(ctx: FileContext, cls: ast.ClassDef, attr: str) -> bool:
    """Some code outside the class's methods stores into or adds to ``<obj>.attr``."""
    for scope, node in uses_of(ctx, attr):
        if not isinstance(node, ast.Attribute):
            continue
        parent = ctx.parent(node)
        if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, (ast.Store, ast.Del)):
            return True  # an element replaced, here or elsewhere
        if scope.class_node is cls and scope.self_name and dotted(node.value) == scope.self_name:
            continue  # the class's own writes and additions are read as such
        if isinstance(node.ctx, (ast.Store, ast.Del)) or isinstance(parent, ast.Attribute) and parent.attr in SEQUENCE_ADDS:
            return True
    return False


def _path(target: ast.expr, name: str) -> Optional[tuple[int, ...]]:
    """Where ``name`` sits in an unpacking target: () for the whole, (i, j) inside nested tuples."""
    if isinstance(target, ast.Name):
        return () if target.id == name else None
    if isinstance(target, (ast.Tuple, ast.List)):
        for index, element in enumerate(target.elts):
            inner = _path(element, name)
            if inner is not None:
                return None if isinstance(element, ast.Starred) else (index, *inner)
    return None


def _part(shape: Optional[Shape], path: tuple[int, ...]) -> Optional[Shape]:
    for index in path:
        if not isinstance(shape, Parts) or index >= len(shape.parts):
            return None
        shape = shape.parts[index]
    return shape


def _join(a: Optional[Shape], b: Optional[Shape]) -> Optional[Shape]:
    """The shape both have; an empty collection takes the other's elements."""
    if a == b:
        return a
    if isinstance(a, Items) and isinstance(b, Items):
        return b if a == EMPTY else a if b == EMPTY else Items(_join(a.element, b.element))
    if isinstance(a, Parts) and isinstance(b, Parts) and len(a.parts) == len(b.parts):
        return Parts(tuple(_join(x, y) for x, y in zip(a.parts, b.parts)))
    return None


def _join_all(shapes) -> Optional[Shape]:
    """The shape all of ``shapes`` have; None for none."""
    result: Optional[Shape] = None
    for index, shape in enumerate(shapes):
        result = shape if index == 0 else _join(result, shape)
        if result is None:
            return None
    return result
