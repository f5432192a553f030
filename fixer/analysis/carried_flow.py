"""Straight-line data flow inside one iteration: which expressions feed a backward call, which
statements always run, and the names an expression mentions. Used by the carried-value analyses
(``carried.py`` and the rules on graphs kept across calls)."""

from __future__ import annotations

import ast
from typing import Callable, Iterable, Optional

from fixer.analysis.names import dotted
from fixer.analysis.passes import is_pass_filter
from fixer.analysis.scopes import Scope, enclosing_block, walk_local
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.analysis.vocabulary import MERGES, QUEUE_ADDS, SEQUENCE_ADDS, SET_ADDS

MUTATORS = SEQUENCE_ADDS | SET_ADDS | QUEUE_ADDS | MERGES


def names_in(expr: Optional[ast.AST]) -> set[str]:
    """Dotted names read or written anywhere in ``expr`` (``self.h[0]`` -> {"self.h", "self"})."""
    if expr is None:
        return set()
    return {name for node in walk(expr) if isinstance(node, (ast.Name, ast.Attribute)) and (name := dotted(node))}


def contains(outer: ast.AST, inner: ast.AST) -> bool:
    """True if ``inner`` is ``outer`` or one of its descendants. Spans of an AST nest or are
    disjoint, so positions answer at once; equal spans (``Expr`` and its call) and nodes without a
    position are settled by walking ``outer``."""
    if outer is inner:
        return True
    if hasattr(outer, "lineno") and hasattr(inner, "lineno"):
        start, end = (outer.lineno, outer.col_offset), (outer.end_lineno, outer.end_col_offset)
        decorators = getattr(outer, "decorator_list", None)
        if decorators:  # decorators come before the `def`/`class` line
            start = min(start, (decorators[0].lineno, decorators[0].col_offset))
        inner_start, inner_end = (inner.lineno, inner.col_offset), (inner.end_lineno, inner.end_col_offset)
        if None not in (*end, *inner_end):
            if inner_start < start or inner_end > end:
                return False
            if (inner_start, inner_end) != (start, end):
                return True
    return any(node is inner for node in walk(outer))


def inside(ctx: FileContext, node: ast.AST, container: ast.AST) -> bool:
    """True if ``node`` is a proper descendant of ``container`` (by positions where both have them)."""
    if node is container:
        return False
    if hasattr(node, "end_lineno") and hasattr(container, "end_lineno"):
        return contains(container, node)
    return any(parent is container for parent in ctx.ancestors(node))


def nodes_inside(ctx: FileContext, scope: Scope, nodes: list[ast.AST], loop: ast.AST) -> list[ast.AST]:
    """The nodes of ``nodes`` (the scope's, in preorder) inside ``loop``: the run that follows it,
    not a test of every node of the scope for each loop of it."""
    at = ctx.memo(("node_order", id(scope.node)), lambda: {id(n): i for i, n in enumerate(nodes)}).get(id(loop))
    if at is None:
        return [n for n in nodes if inside(ctx, n, loop)]
    end = at + 1
    while end < len(nodes) and inside(ctx, nodes[end], loop):
        end += 1
    return nodes[at + 1 : end]


def position(node: ast.AST) -> tuple[int, int]:
    if isinstance(node, ast.withitem):  # `with f() as x` binds x: a definition without a position
        node = node.context_expr
    return node.lineno, node.col_offset


def end_position(node: ast.AST) -> tuple[int, int]:
    if isinstance(node, ast.withitem):
        node = node.optional_vars or node.context_expr
    return node.end_lineno or node.lineno, node.end_col_offset or 0


def always_runs(ctx: FileContext, node: ast.AST, container: ast.AST) -> bool:
    """True if ``node`` runs whenever ``container``'s body does: only ``with`` blocks, ``try``
    bodies and the loop's pass filter lie between them (no other ``if``, inner loop or handler)."""
    child = ctx.statement_of(node)
    for parent in ctx.ancestors(child):
        if parent is container:
            return child in getattr(container, "body", [])
        if isinstance(parent, (ast.With, ast.AsyncWith)) or is_pass_filter(ctx, parent, child):
            pass
        elif isinstance(parent, ast.Try) and (child in parent.body or child in parent.finalbody):
            pass
        else:
            return False
        child = parent
    return False


def dominates(ctx: FileContext, stmt: ast.AST, node: ast.AST) -> bool:
    """True if ``stmt`` (which precedes ``node`` in the source) surely runs before ``node``: it sits
    in a block that encloses ``node``, inside only ``with`` blocks and ``try`` bodies."""
    if end_position(stmt) > position(node) or contains(stmt, node):
        return False
    child = stmt
    for parent in ctx.ancestors(stmt):
        if contains(parent, node):
            block = enclosing_block(ctx, child)
            return block is not None and any(contains(s, node) for s in block)
        if isinstance(parent, (ast.With, ast.AsyncWith)) or isinstance(parent, ast.Try) and child in parent.body:
            child = parent
            continue
        return False
    return False


def surely_defines(stmt: ast.AST, name: str, memo: Optional[dict[int, bool]] = None) -> bool:
    """True if running ``stmt`` always binds ``name`` (an assignment, or an ``if``/``else`` or
    ``try`` whose every branch does or leaves the block). ``memo`` (one per name) keeps long ``elif`` chains linear."""
    memo = {} if memo is None else memo
    if id(stmt) not in memo:
        memo[id(stmt)] = _surely_defines(stmt, name, memo)
    return memo[id(stmt)]


def _surely_defines(stmt: ast.AST, name: str, memo: dict[int, bool]) -> bool:
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return name in statement_effect(stmt)[0] and not any(isinstance(t, ast.Subscript) for t in targets)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return _block_defines(stmt.body, name, memo)
    if isinstance(stmt, ast.If):
        return _block_defines(stmt.body, name, memo) and _block_defines(stmt.orelse, name, memo)
    if isinstance(stmt, ast.Try):
        return _block_defines(stmt.body, name, memo) and all(_block_defines(h.body, name, memo) for h in stmt.handlers)
    return False


JUMPS = (ast.Continue, ast.Break, ast.Return, ast.Raise)


def _block_defines(block: list[ast.stmt], name: str, memo: dict[int, bool]) -> bool:
    """Some statement binds ``name``, or the block cannot fall through (``continue``, ``return``
    ...): it never reaches a read after it, so it defines every name vacuously."""
    return any(isinstance(s, JUMPS) or surely_defines(s, name, memo) for s in block)


def statement_effect(stmt: ast.AST) -> tuple[set[str], list[ast.expr]]:
    """(names a simple statement defines, expressions its new values come from). A mutating call
    ``xs.append(v)`` or ``xs[k] = v`` defines ``xs`` from ``v``."""
    if isinstance(stmt, ast.Assign):
        defined: set[str] = set()
        for target in stmt.targets:
            defined |= _target_names(target)
        return defined, [stmt.value]
    if isinstance(stmt, ast.AugAssign):
        return _target_names(stmt.target), [stmt.value, stmt.target]
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        return _target_names(stmt.target), [stmt.value]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return _target_names(stmt.target), [stmt.iter]
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
            base = mutated_base(func.value)
            if base:
                return {base}, [*stmt.value.args, *(k.value for k in stmt.value.keywords)]
    return set(), []


def mutated_base(node: ast.expr) -> Optional[str]:
    """``xs`` for ``xs``, ``xs[k]``, ``self.bank["a"]`` (the container a mutation changes)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return dotted(node)


def _target_names(target: ast.AST) -> set[str]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(e) for e in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    if isinstance(target, ast.Subscript):
        base = mutated_base(target)
        return {base} if base else set()
    name = dotted(target)
    return {name} if name else set()


SIMPLE = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.For, ast.AsyncFor)


class Feeding:
    """What feeds one backward call within one pass of ``body``: the names whose values flow into
    its target (``live``) and the expressions that compute them (``sources``). Statements after
    the backward call and control flow are ignored; a name stays live once it is (no kills).
    ``names`` says which names of an expression its value flows from (every name, by default)."""

    def __init__(
        self, ctx: FileContext, body: Iterable[ast.stmt], target: ast.expr, backward_stmt: ast.stmt,
        names: Callable[[ast.expr], set[str]] = names_in,
    ):
        self.live: set[str] = names(target)
        self.sources: list[ast.expr] = [target]
        limit = position(backward_stmt)
        statements = [
            n for n in walk_local(list(body), ctx=ctx) if isinstance(n, SIMPLE) and position(n) < limit and n is not backward_stmt
        ]
        for _ in range(2):  # a second sweep for values that flow around an inner loop
            for stmt in reversed(statements):
                defined, values = statement_effect(stmt)
                if defined & self.live:
                    for value in values:
                        if not any(value is s for s in self.sources):
                            self.sources.append(value)
                        self.live |= names(value)

    def reaches(self, node: ast.AST) -> bool:
        """True if the expression ``node`` is part of a value that feeds the backward call."""
        return any(contains(source, node) for source in self.sources)


def blocks_around(ctx: FileContext, stmt: ast.AST) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Spans of the blocks in which ``dominates`` may find ``stmt`` enclosing a later node: its own
    block and, past ``with`` and ``try`` bodies, the blocks around them (a cheap test before it)."""
    spans = []
    child = stmt
    for parent in ctx.ancestors(stmt):
        block = enclosing_block(ctx, child)
        if block is not None:
            spans.append((position(block[0]), end_position(block[-1])))
        if not (isinstance(parent, (ast.With, ast.AsyncWith)) or isinstance(parent, ast.Try) and child in parent.body):
            break
        child = parent
    return spans


def runs_on_every_pass(ctx: FileContext, stmt: ast.stmt, region: ast.AST, alternatives: list[ast.AST]) -> bool:
    """``stmt`` (or one of ``alternatives``) runs on every pass of ``region``, a loop or a
    function's body: between them lie only ``with`` blocks, ``try`` bodies, the loop's filters
    and ``if``/``else`` whose other branch holds an alternative too (``if use_sum:
    loss.sum().backward() else: loss.mean().backward()``)."""
    child = stmt
    for parent in ctx.ancestors(stmt):
        if parent is region:
            return any(child is s for s in region.body)
        if is_pass_filter(ctx, parent, child):
            pass  # every pass the loop's filter selects
        elif isinstance(parent, ast.If):
            other = parent.orelse if any(child is s for s in parent.body) else parent.body
            if not any(contains(s, a) for s in other for a in alternatives):
                return False
        elif not (isinstance(parent, (ast.With, ast.AsyncWith)) or isinstance(parent, ast.Try) and child in parent.body):
            return False
        child = parent
    return False
