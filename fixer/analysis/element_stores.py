"""Method summaries: the elements of a container argument that a method adds into its object.

``element_stores(ctx, method)`` lists what ``obj.method(container)`` keeps of its argument's
elements: ``for name, value in losses.items(): self.sums[name] += value`` adds each value of the
dict ``losses`` to a field of the object, as do ``for v in values: self.history.append(v)`` and
``self.totals["loss"] += losses["loss"]``. So does a recurrence, a store whose new value is computed
from what the slot held before (``self.ema[k] = 0.9 * self.ema[k] + 0.1 * v``, also through a name
bound once to that read, ``prev = self.ema[k]``): the slot chains every element it is given. An element read through ``.item()``, ``.detach()`` or
``float()`` is not kept (``flow.flowing_nodes``). Each store says which parameter it reads, the
field it adds to and the element occurrences a detaching edit would wrap.

``element_kinds(ctx, scope, expr, at)`` is the value-side fact the callers need: the kinds of the
elements of the container ``expr`` holds at ``at`` (a dict or list literal, a name or a field
(``self.terms``) bound in the scope only to such values, a call of a project function whose every
return is one); None when unknown.

``numeric_readers(ctx, cls, store)`` tells how the field is read elsewhere: "number" when every
read converts what it reads with ``float()``/``int()`` (so each element is a one-element tensor today
and a Python number would do), "tensor" when some read takes ``.item()``, ``.tolist()`` or
``.detach()`` of it (a membership test, ``k in self.f``, reads no element). Reads from outside the class count on a name holding an instance of it
(``agent.f``, or ``log = agent.f`` and then ``float(log["x"])``), in this file and in the files
importing the class (``importers.class_importers``); None when an importing file hands an instance
on, when the field is read or
written otherwise outside the object's methods, or reset by the storing method itself (then whether
it outlives a call is unknown)."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import Optional

from fixer.analysis.assignments import scope_assignments
from fixer.analysis.call_sites import holds_instance, parameter_position
from fixer.analysis.callees import called_function
from fixer.analysis.flow import flowing_nodes
from fixer.analysis.graph import Kind, facts
from fixer.analysis.importers import class_importers
from fixer.analysis.imported_definitions import imported_class, imported_function
from fixer.analysis.names import dotted, qualified
from fixer.analysis.scopes import RETURNS, Scope, nodes_of, scope_nodes, scope_of, scopes
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.analysis.vocabulary import SEQUENCE_ADDS

NUMBER_CONVERSIONS = frozenset({"float", "int"})
ELEMENT_METHODS = frozenset({"items", "values"})  # for k, v in d.items() / for v in d.values()
READ_METHODS = frozenset({"item", "tolist", "detach"})
KEYS = "keys"  # a read that only tests for a key
STORING = frozenset({ast.AugAssign, ast.Assign, ast.Expr})  # the statements ``_addition`` and ``_recurrence`` read


@dataclass(frozen=True)
class ElementStore:
    stmt: ast.stmt  # the statement adding to the field
    field: str  # the attribute of the object it adds to (``sums`` for ``self.sums[name] += v``)
    parameter: str  # the method parameter whose elements are kept
    elements: tuple[ast.expr, ...]  # the element occurrences in the added value
    iterated: bool  # read by iterating the parameter itself (``for v in p``): elements of a sequence, keys of a dict
    own_reads: tuple[ast.stmt, ...] = ()  # ``prev = self.ema[k]``: the recurrence's read of the slot


def element_stores(ctx: FileContext, method: Scope) -> list[ElementStore]:
    return ctx.memo(("element_stores", id(method.node)), lambda: list(_stores(ctx, method)))


def _stores(ctx: FileContext, method: Scope):
    me = method.self_name
    if not me:
        return
    params = {a.arg for a in method.node.args.posonlyargs + method.node.args.args + method.node.args.kwonlyargs} - {me}
    bound = element_names = previous = None  # each made when a statement first needs it: most methods store into no field
    for node in nodes_of(method, STORING):
        added = _addition(node, me)
        own_reads: tuple[ast.stmt, ...] = ()
        if added is None and node.__class__ is ast.Assign and len(node.targets) == 1 and _field(node.targets[0], me) is not None:
            bound = _bound_names(method) if bound is None else bound
            previous = _previous_reads(method, bound) if previous is None else previous
            added, own_reads = _recurrence(ctx, node, me, previous, bound)
        if added is None:
            continue
        bound = _bound_names(method) if bound is None else bound
        element_names = _element_names(method, params, bound) if element_names is None else element_names
        field, value = added
        found = [e for e in flowing_nodes(ctx, value) if _element_of(e, element_names, params, bound)]
        elements = tuple(e for e in found if not any(a in found for a in ctx.ancestors(e)))  # `p[k]`, not its `k`
        parameters = {_element_of(e, element_names, params, bound)[0] for e in elements}
        if elements and len(parameters) == 1:
            iterated = any(_element_of(e, element_names, params, bound)[1] for e in elements)
            yield ElementStore(node, field, parameters.pop(), elements, iterated, own_reads)


def _previous_reads(method: Scope, bound: dict[str, int]) -> dict[str, tuple[str, ast.stmt]]:
    """Names bound once to a read of a field or a slot of one (``prev = self.ema[k]``) -> (the
    read, as a dump, the statement)."""
    found = {}
    for node in scope_nodes(method):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and bound.get(node.targets[0].id) == 1 and _field(node.value, method.self_name):
            found[node.targets[0].id] = (ast.dump(node.value, annotate_fields=False), node)
    return found


def _recurrence(ctx: FileContext, node: ast.AST, me: str, previous: dict[str, tuple[str, ast.stmt]], bound: dict[str, int]):
    """((field, stored value), the statements reading the slot) for ``self.f[k] = g(self.f[k], v)``:
    the slot's previous content flows into what is stored (a test such as ``prev is None`` only
    reads it). The slot's key names are bound once, so the read and the store name one slot."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return None, ()
    target = node.targets[0]
    field = _field(target, me)
    if field is None or any(bound.get(n.id, 0) > 1 for n in walk(target) if isinstance(n, ast.Name) and n.id != me):
        return None, ()
    slot = ast.dump(target, annotate_fields=False).replace("Store", "Load")
    reads: list[ast.stmt] = []
    for read in flowing_nodes(ctx, node.value):
        if isinstance(ctx.parent(read), ast.Compare):
            continue
        if read.__class__ is target.__class__ and ast.dump(read, annotate_fields=False) == slot:  # (a dump names the class first)
            reads.append(node)
        elif isinstance(read, ast.Name) and previous.get(read.id, ("", None))[0] == slot:
            reads.append(previous[read.id][1])
    return ((field, node.value), tuple(r for r in reads if r is not node)) if reads else (None, ())


def _addition(node: ast.AST, me: str) -> Optional[tuple[str, ast.expr]]:
    """(field, added value) for ``self.f += v``, ``self.f[k] += v``, ``self.f[k] = self.f[k] + v``,
    ``self.f.append(v)``, ``self.f[k].append(v)``."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        field = _field(node.target, me)
        return (field, node.value) if field else None
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Add):
        field = _field(node.targets[0], me)
        if not field:
            return None  # (no dump of a target that is no field of the object)
        target = ast.dump(node.targets[0], annotate_fields=False).replace("Store", "Load")
        for own, other in ((node.value.left, node.value.right), (node.value.right, node.value.left)):
            if ast.dump(own, annotate_fields=False) == target:
                return field, other
        return None
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Attribute):
        call = node.value
        if call.func.attr in SEQUENCE_ADDS and len(call.args) == 1 and not call.keywords:
            field = _field(call.func.value, me)
            return (field, call.args[0]) if field else None
    return None


def _field(target: ast.expr, me: str) -> Optional[str]:
    while isinstance(target, ast.Subscript):
        target = target.value
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == me:
        return target.attr
    return None


def _bound_names(method: Scope) -> dict[str, int]:
    """How many times each name is bound in the method (assignments, loop targets, parameters)."""
    counts: dict[str, int] = {}
    for node in scope_nodes(method):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            counts[node.id] = counts.get(node.id, 0) + 1
    return counts


def _element_names(method: Scope, params: set[str], bound: dict[str, int]) -> dict[str, tuple[str, bool]]:
    """Loop variables bound once to the elements of a parameter: ``v`` of ``for k, v in p.items()``,
    ``for v in p.values()`` or ``for v in p`` -> (``p``, whether ``p`` itself is iterated)."""
    found: dict[str, tuple[str, bool]] = {}
    for node in scope_nodes(method):
        if not isinstance(node, (ast.For, ast.AsyncFor)):
            continue
        source, target = node.iter, node.target
        method_name = None
        if isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) and not source.args:
            method_name, source = source.func.attr, source.func.value
        if not (isinstance(source, ast.Name) and source.id in params and bound.get(source.id, 0) == 0):
            continue
        if method_name == "items" and isinstance(target, ast.Tuple) and len(target.elts) == 2:
            target = target.elts[1]
        elif method_name not in (None, "values"):
            continue
        if isinstance(target, ast.Name) and bound.get(target.id) == 1:
            found[target.id] = (source.id, method_name is None)
    return found


def _element_of(node: ast.AST, element_names: dict[str, tuple[str, bool]], params: set[str], bound: dict[str, int]) -> Optional[tuple[str, bool]]:
    """(the parameter whose element ``node`` is, whether read by iterating it): a loop variable
    over it, or ``p[key]``."""
    if isinstance(node, ast.Name):
        return element_names.get(node.id)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in params:
        return (node.value.id, False) if bound.get(node.value.id, 0) == 0 else None
    return None


def element_kinds(ctx: FileContext, scope: Scope, expr: ast.expr, at: ast.AST, sequence: bool = False, depth: int = 2) -> Optional[set[Kind]]:
    """``sequence``: the elements are read by iterating the container, so a dict (whose iteration
    gives its keys) yields None."""
    if isinstance(expr, ast.Dict):
        if any(k is None for k in expr.keys) or sequence:
            return None  # {**other}: what it spreads is not read here
        return {facts(ctx, scope).kind(v, at) for v in expr.values}
    if isinstance(expr, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in expr.elts):
            return None
        return {facts(ctx, scope).kind(e, at) for e in expr.elts}
    name = dotted(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else None
    if name and depth > 0:  # a name, or a field (self.parts) bound in the scope
        defs = facts(ctx, scope).reaching(name, at)
        kinds: set[Kind] = set()
        for stmt, value in defs:
            if value is None or not isinstance(stmt, ast.Assign) or dotted(stmt.targets[0]) != name:
                return None
            found = element_kinds(ctx, scope, value, stmt, sequence, depth - 1)
            if found is None:
                return None
            kinds |= found
        return kinds if defs else None
    if isinstance(expr, ast.Call) and depth > 0:
        callee = called_function(ctx, scope, expr.func)
        if callee is None:
            return None
        home = callee.ctx or ctx
        returns = [n.value for n in nodes_of(callee, RETURNS) if isinstance(n, ast.Return)]
        kinds = set()
        for value in returns:
            found = element_kinds(home, callee, value, value, sequence, depth - 1) if value is not None else None
            if found is None:
                return None
            kinds |= found
        return kinds if returns else None
    return None


def bound_argument(method: Scope, parameter: str, call: ast.Call) -> Optional[ast.expr]:
    """The argument ``call`` passes for ``parameter`` (None for a default or a spread)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    for keyword in call.keywords:
        if keyword.arg == parameter:
            return keyword.value
    position = parameter_position(method, parameter)
    return call.args[position] if position is not None and 0 <= position < len(call.args) else None


def numeric_readers(ctx: FileContext, cls: ast.ClassDef, store: ElementStore) -> Optional[str]:
    field, own = store.field, (store.stmt, *store.own_reads)
    verdicts = set()
    for method in scopes(ctx):
        if method.class_node is not cls:
            continue
        for node in scope_nodes(method):
            if not (isinstance(node, ast.Attribute) and node.attr == field and isinstance(node.value, ast.Name)):
                continue
            if node.value.id != method.self_name:
                return None  # another object's field of that name, or the field read from outside
            if any(a in own for a in ctx.ancestors(node)):
                continue
            if not isinstance(node.ctx, ast.Load):
                if getattr(method.node, "name", "") != "__init__" and any(a is method.node for a in ctx.ancestors(store.stmt)):
                    return None  # reset by the storing method itself
                continue
            verdicts.add(_read(ctx, node))
    verdicts |= {_outside_read(ctx, n, cls) for n in walk(ctx.tree)
                 if isinstance(n, ast.Attribute) and n.attr == field and not _within(ctx, n, cls) and not _another_class_own(ctx, n, cls)}
    for other in class_importers(ctx, cls):  # the scripts that construct and use the object
        if _handed_on(other, ctx, cls):
            return None
        verdicts |= {_outside_read(other, n, cls) for n in walk(other.tree) if isinstance(n, ast.Attribute) and n.attr == field}
    verdicts.discard(KEYS)
    if None in verdicts or not verdicts:
        return None
    return "tensor" if "tensor" in verdicts else "number"


def _another_class_own(ctx: FileContext, node: ast.Attribute, cls: ast.ClassDef) -> bool:
    """``self.sums`` in a method of another class of the file, neither class having bases: that
    object's own field of the same name, never an instance of ``cls``."""
    scope = scope_of(ctx, node)
    other = scope.class_node
    return (other is not None and other is not cls and not other.bases and not cls.bases
            and isinstance(node.value, ast.Name) and node.value.id == scope.self_name)


def _outside_read(ctx: FileContext, node: ast.Attribute, cls: ast.ClassDef) -> Optional[str]:
    """A read of the field from outside the class, on a name that holds an instance of it
    (``agent.sums``), judged as a read inside it; also through a name bound once to it (``ema =
    agent.sums`` and then ``float(ema["loss"])``). None for anything else (a store, another object)."""
    scope = scope_of(ctx, node)
    if not (isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name) and holds_instance(ctx, scope, node.value.id, cls)):
        return None
    stmt = ctx.parent(node)
    if not (isinstance(stmt, ast.Assign) and stmt.value is node and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return _read(ctx, node)
    alias = stmt.targets[0].id
    if len(scope_assignments(ctx, scope).assignments.get(alias, [])) != 1:
        return None
    uses = {_read(ctx, n) for n in walk(scope.node) if isinstance(n, ast.Name) and n.id == alias and isinstance(n.ctx, ast.Load)} - {KEYS}
    return None if None in uses or not uses else "tensor" if "tensor" in uses else "number"


def _handed_on(other: FileContext, home: FileContext, cls: ast.ClassDef) -> bool:
    """A file importing the class uses an instance of it otherwise than through an attribute or as
    an argument of a function or class of the class's own file (whose reads are counted there):
    ``print(tracker)``, ``report(tracker)`` of a third file. Whoever gets it may read any field."""
    return any(
        isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and not isinstance(other.parent(n), ast.Attribute)
        and not _given_home(other, home, n) and holds_instance(other, scope, n.id, cls)
        for scope in scopes(other) for n in scope_nodes(scope)
    )


def _given_home(other: FileContext, home: FileContext, node: ast.Name) -> bool:
    """``node`` is an argument of a call of a function or class that ``home`` defines."""
    call = other.parent(node)
    if not (isinstance(call, ast.Call) and node in call.args):
        return False
    function = imported_function(other, call.func)
    found = imported_class(other, qualified(other, call.func) or "")
    defined = function.ctx if function is not None else found[0] if found is not None else None
    return defined is not None and os.path.abspath(defined.path) == os.path.abspath(home.path)


def _within(ctx: FileContext, node: ast.AST, cls: ast.ClassDef) -> bool:
    return any(a is cls for a in ctx.ancestors(node))


def _read(ctx: FileContext, node: ast.expr) -> Optional[str]:
    """How one read of the field uses what it reads: "number" when converted with ``float()`` or
    ``int()`` (``float(self.f[k])``, ``for k, v in self.f.items(): ... float(v)``), "tensor" when
    read with ``.item()``, ``.tolist()`` or ``.detach()``, None for any other use (returned,
    passed on, computed with: it may be meant to keep its graph)."""
    parent = ctx.parent(node)
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return _use(ctx, parent)
    if isinstance(parent, ast.Attribute) and parent.attr in ELEMENT_METHODS and isinstance(ctx.parent(parent), ast.Call):
        loop = ctx.parent(ctx.parent(parent))
        if isinstance(loop, (ast.For, ast.comprehension)) and loop.iter is ctx.parent(parent):
            target = loop.target
            if parent.attr == "items":
                if not (isinstance(target, ast.Tuple) and len(target.elts) == 2):
                    return None
                target = target.elts[1]
            if not isinstance(target, ast.Name):
                return None
            region = ctx.parent(loop) if isinstance(loop, ast.comprehension) else loop
            uses = {_use(ctx, n) for n in walk(region) if isinstance(n, ast.Name) and n.id == target.id and isinstance(n.ctx, ast.Load)}
            return None if None in uses or not uses else "tensor" if "tensor" in uses else "number"
    return _use(ctx, node)


def _use(ctx: FileContext, node: ast.AST) -> Optional[str]:
    parent = ctx.parent(node)
    if isinstance(parent, ast.Compare) and any(c is node and isinstance(op, (ast.In, ast.NotIn)) for op, c in zip(parent.ops, parent.comparators)):
        return KEYS  # ``name in self.f``: asks for a key, reads no element
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in NUMBER_CONVERSIONS \
            and parent.args == [node] and not parent.keywords:
        return "number"
    if isinstance(parent, ast.Attribute) and parent.attr in READ_METHODS and isinstance(ctx.parent(parent), ast.Call):
        return "tensor"
    return None
