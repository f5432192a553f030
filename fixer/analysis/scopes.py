"""Scopes (module body, functions, methods), the statements of the file, and loops."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional, Union

from fixer.context import FileContext
from fixer.nodes import child_nodes, preorder

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
LoopNode = Union[ast.For, ast.AsyncFor, ast.While]
LOOPS = (ast.For, ast.AsyncFor, ast.While)
NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@dataclass(frozen=True)
class Scope:
    node: Union[ast.Module, FunctionNode]
    class_node: Optional[ast.ClassDef] = None  # set for methods
    ctx: Optional[FileContext] = field(default=None, compare=False, repr=False, hash=False)

    @property
    def body(self) -> list[ast.stmt]:
        return self.node.body

    @property
    def is_method(self) -> bool:
        return self.class_node is not None

    @functools.cached_property  # asked at almost every step of the analysis
    def self_name(self) -> Optional[str]:
        """Name of the first parameter of a method (usually ``self``); a static method has none."""
        if self.class_node is None or isinstance(self.node, ast.Module) or is_static(self.node):
            return None
        args = self.node.args.posonlyargs + self.node.args.args
        return args[0].arg if args else None


def is_static(node: ast.AST) -> bool:
    """A ``@staticmethod``: a plain function kept in a class."""
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in getattr(node, "decorator_list", ()))


@dataclass
class StatementIndex:
    """One walk over the file's statements (not expressions): scopes, imports, classes, assignments,
    ``global`` and ``nonlocal`` declarations."""

    scopes: list[Scope] = field(default_factory=list)
    imports: list[Union[ast.Import, ast.ImportFrom]] = field(default_factory=list)
    classes: list[ast.ClassDef] = field(default_factory=list)
    assigns: list[ast.Assign] = field(default_factory=list)
    declarations: list[Union[ast.Global, ast.Nonlocal]] = field(default_factory=list)


STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")
# the nodes with statement lists below a function or class (an ``except`` clause, a ``case``):
# the walk goes into no other (most statements are simple)
HOLDING_STATEMENTS = frozenset({
    ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try, getattr(ast, "TryStar", ast.Try),
    ast.ExceptHandler, getattr(ast, "Match", ast.If), getattr(ast, "match_case", ast.If),
})


def statement_index(ctx: FileContext) -> StatementIndex:
    def compute() -> StatementIndex:
        index = StatementIndex(scopes=[Scope(ctx.tree, None, ctx)])
        _index_statements(ctx, index, ctx.tree, None)
        return index

    return ctx.memo("statement_index", compute)


def _index_statements(ctx: FileContext, index: StatementIndex, parent: ast.AST, cls: Optional[ast.ClassDef]) -> None:
    # a module-level function, not a closure: a recursive closure is a reference cycle that keeps
    # the whole tree alive until the cycle collector finds it (a third of a run's collection time)
    for name in STATEMENT_LISTS:
        for child in getattr(parent, name, None) or ():
            ctx.set_parent(child, parent)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                index.scopes.append(Scope(child, cls, ctx))
                _index_statements(ctx, index, child, None)
                continue
            if isinstance(child, ast.ClassDef):
                index.classes.append(child)
                _index_statements(ctx, index, child, child)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                index.imports.append(child)
            elif isinstance(child, ast.Assign):
                index.assigns.append(child)
            elif isinstance(child, (ast.Global, ast.Nonlocal)):
                index.declarations.append(child)
            if child.__class__ in HOLDING_STATEMENTS:
                _index_statements(ctx, index, child, cls)


def scopes(ctx: FileContext) -> list[Scope]:
    """The module and every function and method, outer before inner."""
    return statement_index(ctx).scopes


def assigned_values(ctx: FileContext, name: str) -> list[ast.expr]:
    """The values of the file's ``name = ...`` statements (a plain name among the targets), in order."""

    def compute() -> dict[str, list[ast.expr]]:
        values: dict[str, list[ast.expr]] = {}
        for node in statement_index(ctx).assigns:
            for target in dict.fromkeys(t.id for t in node.targets if isinstance(t, ast.Name)):
                values.setdefault(target, []).append(node.value)
        return values

    return ctx.memo("assigned_values", compute).get(name, [])


def walk_local(nodes: Iterable[ast.AST], include_root: bool = False, ctx: Optional[FileContext] = None) -> Iterator[ast.AST]:
    """Every node under ``nodes`` in source order, stopping at nested functions, classes and
    lambdas (which are yielded themselves but not entered). Records parent links in ``ctx``."""
    stack = list(reversed(list(nodes)))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, NESTED):
            continue
        children = child_nodes(node)
        if ctx is not None:
            ctx.set_parents(children, node)
        stack.extend(reversed(children))


def scope_nodes(scope: Scope) -> list[ast.AST]:
    """Nodes of the scope's own body (not nested scopes' bodies), in source order."""
    ctx = scope.ctx
    if ctx is None:
        return [n for n in walk_local(scope.body) if not isinstance(n, NESTED)]
    return ctx.memo(("scope_nodes", id(scope.node)), lambda: _local_nodes(ctx, _own_roots(scope)))


_NESTED_CLASSES = frozenset(NESTED)  # (ast's node classes are never subclassed)
CALLS = frozenset({ast.Call})
RETURNS = frozenset({ast.Return})
LOOP_STATEMENTS = frozenset(LOOPS)
NAMES = frozenset({ast.Name, ast.Attribute})


STATEMENTS = frozenset(c for c in vars(ast).values() if isinstance(c, type) and issubclass(c, ast.stmt))


def nodes_of(scope: Scope, classes: frozenset[type]) -> list[ast.AST]:
    """The nodes of ``scope_nodes`` of one of ``classes`` (ast's, never subclassed), in source
    order: picked once per scope and classes for the analyses that ask a question of each such
    node (most of a scope's nodes are names and calls, never statements; statements alone are
    picked from the scope's statements, a tenth of its nodes)."""
    ctx = scope.ctx
    every = scope_statements if classes <= STATEMENTS else scope_nodes
    if ctx is None:
        return [n for n in every(scope) if n.__class__ in classes]
    return ctx.memo(("nodes_of", id(scope.node), classes), lambda: [n for n in every(scope) if n.__class__ in classes])


def scope_statements(scope: Scope) -> list[ast.AST]:
    """The statements of ``scope_nodes``, in the same order, walked through statement lists alone
    (and the ``except`` clauses and ``case``s holding some); their parent links recorded."""
    ctx = scope.ctx
    if ctx is None:
        return [n for n in scope_nodes(scope) if n.__class__ in STATEMENTS]
    return ctx.memo(("scope_statements", id(scope.node)), lambda: _local_statements(ctx, _own_roots(scope)))


def _local_statements(ctx: FileContext, roots: list[ast.AST]) -> list[ast.AST]:
    found, stack = [], roots[::-1]
    while stack:
        node = stack.pop()
        if node.__class__ in _NESTED_CLASSES:
            continue
        if node.__class__ in STATEMENTS:
            found.append(node)
        if node.__class__ in HOLDING_STATEMENTS:
            children = [child for name in _statement_fields(node.__class__) for child in getattr(node, name)]
            ctx.set_parents(children, node)
            stack += children[::-1]
    return found


@functools.lru_cache(maxsize=None)
def _statement_fields(cls: type) -> tuple[str, ...]:
    """The statement lists of a node class in field order (``try``: body, handlers, orelse, finalbody)."""
    return tuple(name for name in cls._fields if name in STATEMENT_LISTS)


def _local_nodes(ctx: FileContext, roots: list[ast.AST]) -> list[ast.AST]:
    """``walk_local`` without the nested scopes' nodes, as a list, made without a generator's cost
    per node (nor a call per node to list its children and record their parent links)."""
    return preorder(roots, ctx.parent_links, _NESTED_CLASSES)


def _own_roots(scope: Scope) -> list[ast.AST]:
    """The scope's body, plus parent links from the scope node to it."""
    for stmt in scope.body:
        scope.ctx.set_parent(stmt, scope.node)
    return list(scope.body)


def enclosing_loops(ctx: FileContext, node: ast.AST, scope: Scope) -> list[LoopNode]:
    """Loops of ``scope`` that contain ``node``, innermost first."""
    loops: list[LoopNode] = []
    for parent in ctx.ancestors(node):
        if parent is scope.node:
            break
        if isinstance(parent, LOOPS) and not _in_loop_header(node, parent, ctx):
            loops.append(parent)
    return loops


def _in_loop_header(node: ast.AST, loop: LoopNode, ctx: FileContext) -> bool:
    """True if ``node`` is in the loop's target/iter/test (evaluated once or per iteration but not the body)."""
    header = [loop.test] if isinstance(loop, ast.While) else [loop.target, loop.iter]
    for part in header:
        if node is part or any(anc is part for anc in ctx.ancestors(node)):
            return True
    return False


def is_self_attribute(ctx: FileContext, node: ast.expr) -> bool:
    """``node`` is ``self.x`` in a method whose first parameter is ``self``: an attribute of the
    object, not of a tensor (``self.data`` is a field, not ``tensor.data``)."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        return False
    parent = ctx.parent(node)
    while parent is not None and not isinstance(parent, NESTED):
        parent = ctx.parent(parent)
    if not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)) or not isinstance(ctx.parent(parent), ast.ClassDef):
        return False
    if is_static(parent):
        return False
    args = parent.args.posonlyargs + parent.args.args
    return bool(args) and args[0].arg == node.value.id


def enclosing_block(ctx: FileContext, stmt: ast.AST) -> Optional[list[ast.stmt]]:
    """The statement list (body, else or finally) that holds ``stmt``; None: none holds it."""
    parent = ctx.parent(stmt)
    for field_name in ("body", "orelse", "finalbody"):
        items = getattr(parent, field_name, None) or []
        if any(s is stmt for s in items):
            return items
    return None


def scope_of(ctx: FileContext, node: ast.AST) -> Scope:
    """The innermost function (or the module) that contains ``node``."""
    by_node = {id(s.node): s for s in scopes(ctx)}
    for parent in ctx.ancestors(node):
        if id(parent) in by_node:
            return by_node[id(parent)]
    return by_node[id(ctx.tree)]
