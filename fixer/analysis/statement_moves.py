"""Moving a statement with its comments: where its text starts (the comment lines attached above
it) and ends, and whether it stands alone on its lines so that it can move."""

from __future__ import annotations

import ast

from fixer.context import FileContext


def attached_start(ctx: FileContext, stmt: ast.stmt) -> int:
    """Offset of the first of the comment lines directly above ``stmt`` (same indent, no blank line)."""
    line = stmt.lineno
    indent = ctx.indent_of(stmt.lineno)
    while line > 1:
        above = ctx.lines[line - 2]
        if above.strip().startswith("#") and ctx.indent_of(line - 1) == indent:
            line -= 1
        else:
            break
    return ctx.line_start(line)


def statement_lines(ctx: FileContext, first: ast.stmt, last: ast.stmt) -> tuple[int, int]:
    """(start, end) offsets of whole lines from ``first``'s attached comments to ``last``'s end."""
    return attached_start(ctx, first), ctx.line_end(last.end_lineno)


def movable(ctx: FileContext, stmt: ast.stmt, owner: ast.AST) -> bool:
    """Alone on its lines, and not on the line of its block's header (``for x in y: step()``)."""
    return ctx.is_own_line(stmt) and stmt.lineno > getattr(owner, "lineno", 0)


def is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
