"""Adding a statement on a line of its own, in the indentation of the statement it goes before
or after (or of a function's first statement)."""

from __future__ import annotations

import ast

from fixer.analysis.statement_moves import attached_start, is_docstring
from fixer.context import FileContext
from fixer.rule import Edit


def insert_before(ctx: FileContext, stmt: ast.stmt, text: str) -> Edit:
    """``text`` (one statement) on a new line just above ``stmt``, at its indentation."""
    start = ctx.line_start(stmt.lineno)
    return Edit(start, start, f"{ctx.indent_of(stmt.lineno)}{text}{ctx.newline}")


def insert_after(ctx: FileContext, stmt: ast.stmt, text: str) -> Edit:
    """``text`` (one statement) on a new line just below ``stmt``, at its indentation."""
    end = ctx.line_end(stmt.end_lineno or stmt.lineno)
    return Edit(end, end, f"{ctx.indent_of(stmt.lineno)}{text}{ctx.newline}")


def insert_at_top(ctx: FileContext, function: ast.AST, line: str) -> list[Edit]:
    """Insert ``line`` before the function's first statement (after its docstring), unless the
    body sits on the ``def`` line."""
    body = function.body
    first = body[1] if is_docstring(body[0]) and len(body) > 1 else body[0]
    if first.lineno <= function.lineno:
        return []
    at = attached_start(ctx, first)
    return [Edit(at, at, f"{ctx.indent_of(first.lineno)}{line}{ctx.newline}")]
