"""Whether an assignment runs before a loop in the same pass, once: directly in a block around
the loop (``y = t @ a`` then ``for ...``), or inside an earlier statement of such a block, such as
the last iteration of a previous loop (``for j in range(d_steps): ... fake = netG(z)`` and then
``for j in range(g_steps): ... netD(fake)``). Either way every iteration of the loop reads the
one value the assignment left, and a copy of the assignment at the top of the loop reads the
same inputs, provided nothing rebinds them after it.

``runs_before_once`` answers for the second case (the first is a plain containment test)."""

from __future__ import annotations

import ast

from fixer.analysis.scopes import enclosing_block
from fixer.context import FileContext
from fixer.nodes import walk


def runs_before_once(ctx: FileContext, stmt: ast.Assign, loop: ast.AST) -> bool:
    """``stmt`` precedes ``loop`` inside an earlier statement of a block holding the loop, and no
    name its value reads is bound again after it and before the loop (so a copy of it at the top
    of the loop reads what it read)."""
    holder = _holder(ctx, stmt, loop)
    if holder is None or holder is stmt or holder is loop or any(p is holder for p in ctx.ancestors(loop)):
        return False
    block = enclosing_block(ctx, holder) or []
    ids = [id(s) for s in block]
    region = [holder] + block[ids.index(id(holder)) + 1 :]
    read = {n.id for n in walk(stmt.value) if isinstance(n, ast.Name)}
    for node in (n for part in region for n in walk(part)):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and node.id in read:
            at = _position(ctx.statement_of(node))
            if _position(stmt) < at < _position(loop):
                return False
    return True


def _position(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset


def _holder(ctx: FileContext, stmt: ast.stmt, loop: ast.AST):
    """``stmt`` or its ancestor that is a statement of a block also holding ``loop`` (or an
    ancestor of it); None when there is none."""
    loop_parents = {id(p) for p in ctx.ancestors(loop)}
    node = stmt
    while node is not None:
        parent = ctx.parent(node)
        if parent is None:
            return None
        siblings = enclosing_block(ctx, node) if id(parent) in loop_parents else None
        if siblings:
            if any(s is loop or any(p is s for p in ctx.ancestors(loop)) for s in siblings):
                return node
        node = parent if isinstance(parent, ast.stmt) else None
    return None
