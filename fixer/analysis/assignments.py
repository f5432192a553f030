"""The assignments of each name in one scope, and those of them that may reach a point: the
binding half of the graph facts (graph.GraphFacts), which held_values and the call sites ask
without asking what the values carry."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.names import dotted
from fixer.analysis.placed import Placed, start
from fixer.analysis.scopes import Scope, nodes_of
from fixer.context import FileContext

CONDITIONAL = tuple(
    t for t in (ast.If, ast.Try, getattr(ast, "TryStar", None), ast.For, ast.AsyncFor, ast.While, getattr(ast, "Match", None)) if t
)


BINDINGS = frozenset({ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.withitem, ast.NamedExpr})  # what binds a name (graph_reuse.assigned_names reads the same)


class Assignments:
    """``assignments[name]``: (statement, value) for every binding of ``name`` in the scope, in
    source order; a target unpacked from a call gets ``call[i]`` as its value."""

    def __init__(self, ctx: FileContext, scope: Scope):
        self.ctx = ctx
        self.scope = scope
        self.assignments: dict[str, list[tuple[ast.AST, Optional[ast.expr]]]] = {}
        self._placed: dict[Optional[str], Placed] = {}  # by name; None: all names
        self._all_placed: Optional[list[tuple[str, tuple[ast.AST, Optional[ast.expr]]]]] = None
        for node in nodes_of(self.scope, BINDINGS):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self._bind(target, node, node.value)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
                self._bind(node.target, node, node.value)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                self._bind(node.target, node, None)  # batches from a loader: no graph
            elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                self._bind(node.optional_vars, self.ctx.parent(node) or node, None)  # the With has the position
            elif isinstance(node, ast.NamedExpr):
                self._bind(node.target, node, node.value)

    def _bind(self, target: ast.AST, stmt: ast.AST, value: Optional[ast.expr]) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) else None
            for index, element in enumerate(target.elts):
                if values:
                    part = values[index]
                elif isinstance(value, ast.Call) and not isinstance(element, ast.Starred):
                    part = ast.copy_location(ast.Subscript(value=value, slice=ast.Constant(index), ctx=ast.Load()), value)
                    part.end_lineno, part.end_col_offset = value.end_lineno, value.end_col_offset
                    self.ctx.made_up(part)
                else:
                    part = value
                self._bind(element, stmt, part)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, stmt, value)
        else:
            name = dotted(target)
            if name:
                self.assignments.setdefault(name, []).append((stmt, value))

    def reaching(self, name: str, at: ast.AST) -> list[tuple[ast.AST, Optional[ast.expr]]]:
        """Assignments of ``name`` that may reach ``at``: the latest one before it in source order
        (and earlier ones when that one is conditional); all of them if none precedes ``at``
        (a value carried around a loop)."""
        defs = self.assignments.get(name, [])
        position = start(at)
        around = {id(at), *map(id, self.ctx.ancestors(at))}  # a statement holding ``at`` (a loop header) is not before it
        chosen: list[tuple[ast.AST, Optional[ast.expr]]] = []
        for index in range(self.placed(name).last_before(position), -1, -1):  # those before ``at``, latest first
            stmt = defs[index][0]
            if start(stmt) >= position or id(stmt) in around:
                continue
            if chosen and not self._is_conditional(chosen[-1][0], at):
                break
            chosen.append(defs[index])
        return chosen or defs

    def placed(self, name: str) -> Placed:
        """The assignments of ``name`` indexed by position."""
        if name not in self._placed:
            self._placed[name] = Placed([stmt for stmt, _ in self.assignments.get(name, [])])
        return self._placed[name]

    def assigned_within(self, node: ast.AST) -> list[tuple[str, tuple[ast.AST, Optional[ast.expr]]]]:
        """(name, assignment) for each assignment starting within ``node``'s span, in the order of
        ``assignments`` (name by name)."""
        if self._all_placed is None:
            self._all_placed = [(name, d) for name, defs in self.assignments.items() for d in defs]
            self._placed[None] = Placed([stmt for _, (stmt, _) in self._all_placed])
        return [self._all_placed[i] for i in self._placed[None].starting_within(node)]

    def _is_conditional(self, stmt: ast.AST, at: ast.AST) -> bool:
        at_parents = set(map(id, self.ctx.ancestors(at)))
        child = stmt
        for parent in self.ctx.ancestors(stmt):
            if parent is self.scope.node:
                return False
            if isinstance(parent, CONDITIONAL) and id(parent) not in at_parents and not _body_runs(self.ctx, parent, child):
                return True
            child = parent
        return False


def _body_runs(ctx: FileContext, loop: ast.AST, child: ast.AST) -> bool:
    """``child`` is a statement of the body of ``for _ in range(k)``, ``k`` a positive integer (a
    literal, or a module-level name bound once to one), with no ``break`` or ``continue`` in the
    body: it runs at least once (``fake = G(z)`` in every critic step replaces the one before)."""
    if not isinstance(loop, ast.For) or not any(child is s for s in loop.body) or not _positive_range(ctx, loop.iter):
        return False
    return not any(isinstance(n, (ast.Break, ast.Continue)) for s in loop.body for n in ast.walk(s))


def _positive_range(ctx: FileContext, it: ast.expr) -> bool:
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and len(it.args) == 1 and not it.keywords):
        return False
    count = it.args[0]
    if isinstance(count, ast.Name):
        count = _module_constants(ctx).get(count.id)
    return isinstance(count, ast.Constant) and type(count.value) is int and count.value > 0


def _module_constants(ctx: FileContext) -> dict[str, ast.Constant]:
    """Module-level names bound exactly once in the file, to a constant, and never rebound."""

    def compute() -> dict[str, ast.Constant]:
        stores: dict[str, int] = {}
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                stores[node.id] = stores.get(node.id, 0) + 1
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                for name in node.names:
                    stores[name] = stores.get(name, 0) + 2  # written from a function: not a constant
        return {
            s.targets[0].id: s.value for s in ctx.tree.body
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
            and isinstance(s.value, ast.Constant) and stores.get(s.targets[0].id) == 1
        }

    return ctx.memo("module_constants", compute)


def scope_assignments(ctx: FileContext, scope: Scope) -> Assignments:
    return ctx.memo(("scope_assignments", id(scope.node)), lambda: Assignments(ctx, scope))
