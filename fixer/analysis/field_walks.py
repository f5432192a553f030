"""Can a backward call in a method walk its graph again, when that graph is held by the
object's fields?

``walked_through_fields(ctx, method, call)`` answers None only when it is proven that nothing
can, for the shape of a model class whose methods hand the graph to one another through
``self`` (``forward()`` stores ``self.fake = self.net_g(self.real)``, ``backward_g()`` builds
its loss from ``self.fake`` and backpropagates it last):

- the method is a plain sequence of assignments (to local names and fields of ``self``) and the
  backward call, with counters, prints and logging calls around them, returns nothing; its graph is built from fields, its own locals,
  module calls, torch functions and tensor methods only (no parameter, no call it cannot see);
- the fields of the graph are those it reads (when some store into them may hold a graph: a
  stored value whose kind is not "no graph", where a parameter counts as data when every caller
  passes data), those it stores, and, closing over them, the graph-holding fields their stores
  read;
- the method is called once, as ``self.method()`` in the body of another method, after a
  statement of that body (or of a method it calls first) that stores each field it reads anew;
- every other read of those fields, in the class and through the file's instances of it, is
  detached or converted (``.detach()``, ``.item()``, ``float()``), printed, or given to local
  names whose reads are such, in this file and in each file importing the class (whose
  instances are all made by plain assignments); ``self`` and the instances are never handed on as
  values, no other file calls the method, and no file reads a saved tensor (``grad_fn._saved_*``).
Otherwise it returns a short reason."""

from __future__ import annotations

import ast
import os
from typing import Optional

from fixer.analysis.arguments import parameter_default
from fixer.analysis.bindings import imported_names, module_names
from fixer.analysis.call_sites import argument_of, parameter_position
from fixer.analysis.calls import BackwardCall
from fixer.analysis.class_model import class_methods
from fixer.analysis.flow import flowing_nodes
from fixer.analysis.graph import Kind, facts
from fixer.analysis.importers import class_importers, instances_in, project_constructions
from fixer.analysis.names import dotted, qualified
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.retained import TENSOR_METHODS
from fixer.analysis.retained_callers import callers_pass_data
from fixer.analysis.scopes import NESTED, Scope, scope_nodes, scopes
from fixer.context import FileContext
from fixer.nodes import walk

HARMLESS_CALLS = frozenset({"print"})
MAX_DEPTH = 3


class Unproven(Exception):
    """What stops the proof."""


def walked_through_fields(ctx: FileContext, method: Scope, call: BackwardCall) -> Optional[str]:
    try:
        _prove(ctx, method, call)
    except Unproven as reason:
        return str(reason)
    return None


def _prove(ctx: FileContext, method: Scope, call: BackwardCall) -> None:
    cls, me = method.class_node, method.self_name
    if cls is None or not me or ctx.parent(cls) is not ctx.tree:
        raise Unproven("not a method of a module-level class")
    if not _plain_class(ctx, cls) or method.node.name.startswith("__") or method.node.name == "forward":
        raise Unproven("a base class or subclass may call the method or read the fields")
    body = method.node.body
    statement = ctx.statement_of(call.node)
    if statement not in body or not isinstance(statement, ast.Expr):
        raise Unproven("the backward call is not a statement of the method's body")
    index = body.index(statement)
    for stmt in body[:index]:
        if not (isinstance(stmt, ast.Assign) and all(_plain_target(t, me) for t in stmt.targets) or _bookkeeping(ctx, stmt)):
            raise Unproven(f"line {stmt.lineno} is not a plain assignment")
    bound = {n.id for stmt in body for n in walk(stmt) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    for stmt in body[index + 1 :]:
        loads = {n.id for n in walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if not _bookkeeping(ctx, stmt) or loads & (bound | {me}) and not _logging(ctx, stmt):
            raise Unproven(f"line {stmt.lineno} follows the backward call")
    if any(isinstance(n, NESTED) for n in walk(method.node) if n is not method.node):
        raise Unproven("the method defines nested functions")
    read, stored = _reach(ctx, method, call.target, call.node, MAX_DEPTH * 4)
    holders = {f for f in read if _holds_graph(ctx, cls, f)} | stored
    held = _close(ctx, cls, method, holders)
    _refreshed_before(ctx, method, {f for f in read if f in held})
    _self_not_handed_on(ctx, cls)
    for own in [ctx, *class_importers(ctx, cls)]:  # and the scripts that construct and use the object
        if own is not ctx:
            _holders_not_handed_on(own, instances_in(own, os.path.abspath(ctx.path), cls.name))
        if "_saved_" in own.source:
            raise Unproven("the file reads saved tensors")
        for other in scopes(own):
            if other.node is method.node:
                continue
            for node in scope_nodes(other):
                if isinstance(node, ast.Attribute) and node.attr in held and isinstance(node.ctx, ast.Load):
                    _harmless_read(own, cls, other, node)


def _bookkeeping(ctx: FileContext, stmt: ast.stmt) -> bool:
    """A counter (``n = 0``, ``n += 1`` on a plain name, of numbers only) or a printed or logged message."""
    if isinstance(stmt, (ast.Assign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return all(isinstance(t, ast.Name) for t in targets) and isinstance(stmt.value, ast.Constant)
    return _logging(ctx, stmt)


def _logging(ctx: FileContext, stmt: ast.stmt) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    name = qualified(ctx, stmt.value.func) or dotted(stmt.value.func) or ""
    return name in HARMLESS_CALLS or name.startswith("logging.")


def _plain_class(ctx: FileContext, cls: ast.ClassDef) -> bool:
    """No base but ``object`` or ``nn.Module`` (whose own code calls no method of ours but
    ``forward``), no subclass in the file, no decorator."""
    bases = [qualified(ctx, b) or dotted(b) or "" for b in cls.bases]
    if cls.decorator_list or cls.keywords or any(b not in ("object", "torch.nn.Module", "torch.nn.modules.module.Module") for b in bases):
        return False
    return cls.name not in _base_names(ctx)


def _base_names(ctx: FileContext) -> set[str]:
    """The dotted names the file's classes derive from."""
    return ctx.memo("field_walks_base_names", lambda: {
        dotted(b) for n in walk(ctx.tree) if isinstance(n, ast.ClassDef) for b in n.bases
    })


def _plain_target(target: ast.expr, me: str) -> bool:
    if isinstance(target, ast.Tuple):
        return all(_plain_target(t, me) for t in target.elts)
    return isinstance(target, ast.Name) or isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == me


def _reach(ctx: FileContext, method: Scope, expr: ast.expr, at: ast.AST, budget: int) -> tuple[set[str], set[str]]:
    """(fields read from before the method, fields the method stores) that ``expr``'s graph
    reaches; Unproven on anything it cannot follow."""
    graph, me = facts(ctx, method), method.self_name
    read: set[str] = set()
    stored: set[str] = set()
    todo, seen = [(expr, at)], set()
    while todo:
        if budget <= 0:
            raise Unproven("the graph is too deep to follow")
        budget -= 1
        current, where = todo.pop()
        for node in flowing_nodes(ctx, current):
            if isinstance(node, ast.Call):
                _known_call(ctx, node)
                continue
            name = dotted(node)
            if name is None or name == me or (name, id(where)) in seen:
                continue
            seen.add((name, id(where)))
            head, _, rest = name.partition(".")
            if head == me:
                defs = graph.reaching(f"{me}.{rest.split('.')[0]}", where)
                if not defs:
                    read.add(rest.split(".")[0])
                    continue
                stored.add(rest.split(".")[0])
            else:
                defs = graph.reaching(head, where)
                if not defs:
                    if head in imported_names(ctx) or head in _module_level_defined(ctx):
                        continue
                    raise Unproven(f"`{head}` comes from outside the method")
            for stmt, value in defs:
                if value is None:
                    raise Unproven(f"`{name}` is bound by a statement that cannot be followed")
                todo.append((value, stmt))
    return read, stored


def _known_call(ctx: FileContext, call: ast.Call) -> None:
    func = call.func
    if dotted(func) in module_names(ctx) or (qualified(ctx, func) or "").startswith("torch."):
        return
    if isinstance(func, ast.Attribute) and func.attr in TENSOR_METHODS:
        return
    raise Unproven(f"line {call.lineno} calls what graphfix cannot see into")


def _module_level_defined(ctx: FileContext) -> set[str]:
    """Names the module binds only by ``def`` and ``class`` (never to a value)."""
    def compute() -> set[str]:
        defined = {s.name for s in ctx.tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        assigned = {n.id for n in walk(ctx.tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        return defined - assigned

    return ctx.memo("module_level_defined", compute)


def _stores(ctx: FileContext, cls: ast.ClassDef, field: str) -> list[tuple[Scope, ast.stmt, Optional[ast.expr]]]:
    """Every store into ``field`` of the class's objects: (method, statement, stored value or None)."""
    found = []
    for method in class_methods(ctx, cls).values():
        for node in scope_nodes(method):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    found.extend((method, node, v) for v in _paired(target, node.value, method.self_name, field))
    return found


def _paired(target: ast.expr, value: Optional[ast.expr], me: str, field: str) -> list[Optional[ast.expr]]:
    if isinstance(target, ast.Tuple):
        elements = value.elts if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts) else [None] * len(target.elts)
        return [v for t, e in zip(target.elts, elements) for v in _paired(t, e, me, field)]
    if isinstance(target, ast.Attribute) and target.attr == field and dotted(target.value) == me:
        return [value]
    return []


def _holds_graph(ctx: FileContext, cls: ast.ClassDef, field: str) -> bool:
    """Some store into the field may hold a graph (or it is stored from outside the class)."""
    for method, stmt, value in _stores(ctx, cls, field):
        if value is None:
            return True
        kind = facts(ctx, method).kind(value, stmt)
        if kind == Kind.UNKNOWN and isinstance(value, ast.Name) and _given_data(ctx, cls, method, value.id):
            continue
        if kind not in (Kind.NONE, Kind.LEAF):
            return True
    return any(
        isinstance(n, ast.Attribute) and n.attr == field and not isinstance(n.ctx, ast.Load) and not _in_class(ctx, n, cls)
        for n in walk(ctx.tree)
    )


def _given_data(ctx: FileContext, cls: ast.ClassDef, method: Scope, parameter: str) -> bool:
    """Every call of the method gives ``parameter`` a value without a graph; for ``__init__``,
    every construction of the class in the project (its default when a construction leaves it out)."""
    if getattr(method.node, "name", "") != "__init__":
        return callers_pass_data(ctx, method, parameter)
    sites, position = project_constructions(ctx, cls), parameter_position(method, parameter)
    if sites is None or position is None:
        return False
    for own, scope, call in sites:  # in this file or in a file importing the class
        argument = argument_of(call, parameter, position)
        if argument is None:
            own, argument, scope = ctx, parameter_default(method, parameter), method
        if argument is None or isinstance(argument, ast.Starred) or facts(own, scope).kind(argument, call) not in (Kind.NONE, Kind.LEAF):
            return False
    return True


def _close(ctx: FileContext, cls: ast.ClassDef, method: Scope, fields: set[str]) -> set[str]:
    """The fields and, over their stores outside the method, the graph-holding fields those read.
    A store must read only fields and imports (no local name sharing the graph)."""
    held, todo = set(fields), list(fields)
    while todo:
        field = todo.pop()
        for other, stmt, value in _stores(ctx, cls, field):
            if other.node is method.node:
                continue
            if value is None:
                raise Unproven(f"line {stmt.lineno} stores into `{field}` what cannot be followed")
            for node in flowing_nodes(ctx, value):
                if isinstance(node, ast.Call):
                    _known_call(ctx, node)
                    continue
                name = dotted(node) or ""
                head, _, rest = name.partition(".")
                if head == other.self_name and rest:
                    new = rest.split(".")[0]
                    if new not in held and _holds_graph(ctx, cls, new):
                        held.add(new)
                        todo.append(new)
                elif head != other.self_name and head not in imported_names(ctx):
                    raise Unproven(f"line {stmt.lineno} stores into `{field}` a value other names may share")
    return held


def _refreshed_before(ctx: FileContext, method: Scope, fields: set[str]) -> None:
    """The method's one call, ``self.method()`` in another method's body, follows a statement of
    that body storing each field anew (itself, or as the body of a method it calls)."""
    sites = list(project_call_sites(ctx, method))
    if len(sites) != 1 or sites[0][2] is None or sites[0][0] is not ctx:
        raise Unproven("the method is not called exactly once")
    _, caller, call = sites[0]
    statement = ctx.statement_of(call)
    if caller.class_node is not method.class_node or ctx.parent(statement) is not caller.node or not isinstance(statement, ast.Expr) \
            or statement.value is not call:
        raise Unproven("the method is not called as a statement of another method's body")
    before = caller.node.body[: caller.node.body.index(statement)]
    methods = class_methods(ctx, method.class_node)
    refreshed: set[str] = set()
    for stmt in before:
        refreshed |= _stored_fields(stmt, caller.self_name)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            head, _, name = (dotted(stmt.value.func) or "").partition(".")
            if head == caller.self_name and name in methods:
                called = methods[name]
                for inner in called.node.body:
                    refreshed |= _stored_fields(inner, called.self_name)
    missing = fields - refreshed
    if missing:
        raise Unproven(f"`{sorted(missing)[0]}` is not stored anew before each call")


def _stored_fields(stmt: ast.stmt, me: str) -> set[str]:
    if not isinstance(stmt, ast.Assign):
        return set()
    return {n.attr for t in stmt.targets for n in walk(t) if isinstance(n, ast.Attribute) and dotted(n.value) == me}


def _self_not_handed_on(ctx: FileContext, cls: ast.ClassDef) -> None:
    """``self`` (in the class) and every holder of an instance (each ``Cls(...)`` of the project is
    the value of an assignment) are only ever read through an attribute, never ``__dict__``."""
    for method in class_methods(ctx, cls).values():
        for node in scope_nodes(method):
            if isinstance(node, ast.Name) and node.id == method.self_name and not isinstance(ctx.parent(node), ast.Attribute):
                raise Unproven(f"line {node.lineno} hands the object on")
    if project_constructions(ctx, cls) is None:
        raise Unproven("an instance is made otherwise than by an assignment (here or in a file importing the class)")
    holders = {
        name
        for scope in scopes(ctx)
        for name, defs in facts(ctx, scope).assignments.items()
        if any(isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == cls.name for _, v in defs)
    }
    _holders_not_handed_on(ctx, holders)


def _holders_not_handed_on(ctx: FileContext, holders: set[str]) -> None:
    """The names of the file holding an instance are only ever read through an attribute, and
    the file never reads an object's ``__dict__``."""
    for node in walk(ctx.tree):
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            raise Unproven(f"line {node.lineno} reads an object's __dict__")
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and dotted(node) in holders:
            parent = ctx.parent(node)
            if not (isinstance(parent, ast.Attribute) and parent.value is node):
                raise Unproven(f"line {node.lineno} hands an instance on")


def _harmless_read(ctx: FileContext, cls: ast.ClassDef, scope: Scope, node: ast.AST, depth: int = MAX_DEPTH) -> None:
    """The value read at ``node`` is detached, converted, printed, or held by local names whose
    every read is such."""
    if any(isinstance(a, ast.Lambda) for a in ctx.ancestors(node)):
        raise Unproven(f"line {node.lineno} reads a field of the graph in a lambda")
    statement = ctx.statement_of(node)
    roots = [statement.value] if isinstance(statement, (ast.Assign, ast.Expr, ast.AugAssign, ast.Return, ast.AnnAssign)) else []
    if not roots and not isinstance(statement, (ast.If, ast.While)):
        raise Unproven(f"line {statement.lineno} reads a field of the graph")
    if isinstance(statement, (ast.If, ast.While)):
        roots = [statement.test]
        if not any(n is node for n in walk(statement.test)):
            raise Unproven(f"line {statement.lineno} reads a field of the graph")
    flowing = {id(n) for r in roots if r is not None for n in _all_flowing(ctx, r)}
    if id(node) not in flowing:
        return  # under .detach(), .item(), float(), ...
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and dotted(statement.value.func) in HARMLESS_CALLS:
        return
    if isinstance(statement, ast.Assign) and depth > 0 and all(isinstance(t, ast.Name) for t in statement.targets):
        graph = facts(ctx, scope)
        for target in statement.targets:
            for use in scope_nodes(scope):
                if isinstance(use, ast.Name) and use.id == target.id and isinstance(use.ctx, ast.Load):
                    if any(s is statement for s, _ in graph.reaching(use.id, use)):
                        _harmless_read(ctx, cls, scope, use, depth - 1)
        return
    raise Unproven(f"line {statement.lineno} passes on a field of the graph")


def _all_flowing(ctx: FileContext, root: ast.expr):
    """Flowing nodes, entering attributes' receivers (``model.fake`` in ``print(model.fake)``)."""
    for node in flowing_nodes(ctx, root):
        yield node
        if isinstance(node, ast.Attribute):
            yield from _all_flowing(ctx, node.value)


def _in_class(ctx: FileContext, node: ast.AST, cls: ast.ClassDef) -> bool:
    return any(a is cls for a in ctx.ancestors(node))
