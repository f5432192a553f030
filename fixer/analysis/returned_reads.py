"""What a project function's return value reads of its parameters: a summary its callers read
in their own terms (``compute_loss(self, x)`` with ``return self.criterion(self.model(x), y)``).

``returned_reads(ctx, call)`` answers for a call of a readable function (of this file, or
imported from another project file; no ``*args``/``**kwargs``): the parameter paths its returned
values flow from, read as values (``x``, ``self.memory``), and the receivers of the methods they
call (``self.model``, ``criterion``: the caller decides whether such a receiver is a value or an
object offering a method), found through the function's local names and past ``.detach()``,
``.item()`` and ``.data`` (``flow.flowing_nodes``). None (unknown) when the function may keep
anything: it stores into an attribute, a subscript or a global, adds to a container it did not
make, backpropagates, yields, defines a nested function, or its returns read a name that is
neither a parameter, a local name, an import nor a definition of its module (a module-level
tensor), or a parameter it rebinds."""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from typing import Optional

from fixer.analysis.arguments import bound_arguments
from fixer.analysis.carried_flow import names_in
from fixer.analysis.flow import flowing_nodes, named_function, reaching
from fixer.analysis.graph import DETACHING_ATTRIBUTES, facts
from fixer.analysis.names import dotted
from fixer.analysis.plain_numbers import parameters
from fixer.analysis.scopes import NESTED, RETURNS, Scope, nodes_of, scope_nodes, statement_index
from fixer.analysis.vocabulary import ADDS
from fixer.context import FileContext
from fixer.nodes import walk

REFLECTION = frozenset({"setattr", "delattr", "exec", "eval", "globals", "vars", "locals"})
MAX_LOCAL_STEPS = 50  # local definitions followed back from the returned values


@dataclass(frozen=True)
class ReturnedReads:
    values: frozenset[str]  # parameter paths read as values: ``x``, ``self.memory``
    receivers: frozenset[tuple[str, str]]  # (parameter path, method): ``self.model(...)``


def returned_reads(ctx: FileContext, call: ast.Call) -> Optional[ReturnedReads]:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    helper = named_function(ctx, call)
    if helper is None or helper.node.args.vararg or helper.node.args.kwarg or isinstance(helper.node, ast.AsyncFunctionDef):
        return None
    own = helper.ctx or ctx
    return own.memo(("returned_reads", id(helper.node)), lambda: _summary(own, helper))


def read_arguments(ctx: FileContext, call: ast.Call) -> Optional[list[tuple[ast.expr, Optional[str]]]]:
    """What the call's value reads, in the caller's terms: (expression, None) for a value,
    (receiver, method) for a method called on it (``self.model`` for ``self.model(...)``). An
    argument a path cannot be spelled on (not a dotted name, or the path goes through ``.data``)
    is read whole. None when unknown (no summary, or a parameter the call does not give)."""
    reads = returned_reads(ctx, call)
    if reads is None:
        return None
    given = dict(bound_arguments(named_function(ctx, call), call))
    found: list[tuple[ast.expr, Optional[str]]] = []
    for path, method in [(p, None) for p in sorted(reads.values)] + sorted(reads.receivers):
        root, *rest = path.split(".")
        arg = given.get(root)
        if arg is None:
            return None
        if rest and (dotted(arg) is None or DETACHING_ATTRIBUTES & set(rest)):
            found.append((arg, None))
            continue
        for part in rest:
            arg = ast.Attribute(value=arg, attr=part, ctx=ast.Load())
        found.append((arg, method))
    return found


def returned_field(ctx: FileContext, call: ast.Call) -> Optional[ast.Attribute]:
    """``arg.attr`` when the call runs a summarised project function every ``return`` of which
    hands back ``param.attr`` of one parameter, given ``arg`` (a name or ``self.field``): an
    accessor (``compute_loss(micro)`` returning ``micro.loss``), read as the field itself."""
    helper = named_function(ctx, call) if returned_reads(ctx, call) is not None else None
    returns = [r.value for r in nodes_of(helper, RETURNS) if isinstance(r, ast.Return)] if helper else []
    paths = {dotted(v) if isinstance(v, ast.Attribute) and isinstance(v.value, ast.Name) else None for v in returns}
    if len(paths) != 1 or None in paths:
        return None
    root, attr = paths.pop().split(".")
    arg = dict(bound_arguments(helper, call)).get(root)
    if arg is None or dotted(arg) is None or attr in DETACHING_ATTRIBUTES:
        return None
    return ast.Attribute(value=arg, attr=attr, ctx=ast.Load())


def read_names(ctx: FileContext, expr: Optional[ast.AST]) -> set[str]:
    """The dotted names ``expr`` reads (``carried_flow.names_in``), a call of a summarised project
    function read in the caller's terms too: ``compute_loss(self, y)`` returning
    ``self.readout(self.memory)`` reads ``self.memory``."""
    found = names_in(expr)
    for node in walk(expr) if found else ():
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            for arg, _ in read_arguments(ctx, node) or ():
                found |= names_in(arg)
    return found


def _summary(ctx: FileContext, helper: Scope) -> Optional[ReturnedReads]:
    if not _keeps_nothing(helper):
        return None
    graph, params = facts(ctx, helper), parameters(helper)
    if params & set(graph.assignments):
        return None  # a parameter rebound: its paths are not the caller's
    known = _module_names(ctx)
    values: set[str] = set()
    receivers: set[tuple[str, str]] = set()
    todo = [(r.value, r) for r in nodes_of(helper, RETURNS) if isinstance(r, ast.Return) and r.value is not None]
    done: set[int] = set()
    while todo:
        expr, at = todo.pop()
        if id(expr) in done:
            continue
        if len(done) > MAX_LOCAL_STEPS:
            return None
        done.add(id(expr))
        received: set[int] = set()
        for node in flowing_nodes(ctx, expr, objects=frozenset(params)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (path := dotted(node.func.value)):
                if path.partition(".")[0] in params:
                    receivers.add((path, node.func.attr))
                    received.add(id(node.func.value))
                continue
            path = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if path is None or id(node) in received:
                continue
            root = path.partition(".")[0]
            if root in params:
                values.add(path)
            elif root in graph.assignments:
                defs = reaching(graph, root, at)
                if not defs or any(value is None for _, value in defs):
                    return None  # a loop variable, a ``with`` target: not followed
                todo += [(value, stmt) for stmt, value in defs]
            elif root not in known:
                return None  # a module-level value (or a comprehension's variable)
    return ReturnedReads(frozenset(values), frozenset(receivers))


def _keeps_nothing(helper: Scope) -> bool:
    for node in scope_nodes(helper):
        if isinstance(node, (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, *NESTED)) and node is not helper.node:
            return False
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            return False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (node.func.attr in ADDS | {"backward"} or _in_place(node.func.attr)):
            return False
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in REFLECTION:
            return False
    return True


def _in_place(method: str) -> bool:
    return method.endswith("_") and not method.endswith("__")  # ``x.add_(v)``, ``buffer.copy_(v)``


def _module_names(ctx: FileContext) -> frozenset[str]:
    """The imports and the function and class definitions of the module (never a tensor)."""
    def compute() -> frozenset[str]:
        index = statement_index(ctx)
        names = {(a.asname or a.name).partition(".")[0] for i in index.imports for a in i.names}
        names |= {n.name for n in ctx.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        return frozenset(names | set(dir(builtins)))

    return ctx.memo("returned_reads_module_names", compute)
