"""Adding a statement on a line of its own, in the indentation of the statement it goes before
or after (or of a function's first statement); a statement moved one level in under a ``with``
(``torch.no_grad()``), moved before or after another (``zero_grad()``), or deleted (a premature
``step()``)."""

from __future__ import annotations

import ast
from typing import Optional

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


def wrap_in(ctx: FileContext, stmt: ast.stmt, header: str) -> Optional[Edit]:
    """``stmt`` moved one level in, under ``header:`` (``with torch.no_grad()``) at its
    indentation; None when it shares its lines with another statement or holds a string that
    spans lines (its text would change)."""
    if not ctx.is_own_line(stmt):
        return None
    if any(isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes)) and n.lineno != n.end_lineno for n in ast.walk(stmt)):
        return None
    start, end = ctx.line_start(stmt.lineno), ctx.line_end(stmt.end_lineno or stmt.lineno)
    lines = ctx.source[start:end].splitlines(keepends=True)
    inner = "".join(f"{ctx.indent_unit}{line}" if line.strip() else line for line in lines)
    return Edit(start, end, f"{ctx.indent_of(stmt.lineno)}{header}:{ctx.newline}{inner}")


def move_edits(ctx: FileContext, stmt: ast.stmt, anchor: ast.stmt, after: bool = False) -> Optional[list[Edit]]:
    """``stmt`` (alone on one line) taken out and put just before ``anchor`` (``after``: just
    below it), at ``anchor``'s indentation; None when either shares its line or they overlap."""
    if not ctx.is_own_line(stmt) or stmt.lineno != stmt.end_lineno or not ctx.is_own_line(anchor):
        return None
    if anchor.lineno <= stmt.lineno <= (anchor.end_lineno or anchor.lineno):
        return None
    text = ctx.text(stmt)
    return [delete_statement(ctx, stmt), insert_after(ctx, anchor, text) if after else insert_before(ctx, anchor, text)]


def delete_statement(ctx: FileContext, stmt: ast.stmt) -> Optional[Edit]:
    """``stmt``'s lines taken out; None when it shares a line with another statement."""
    if not ctx.is_own_line(stmt):
        return None
    return Edit(ctx.line_start(stmt.lineno), ctx.line_end(stmt.end_lineno or stmt.lineno), "")


def insert_at_top(ctx: FileContext, function: ast.AST, line: str) -> list[Edit]:
    """Insert ``line`` before the function's first statement (after its docstring), unless the
    body sits on the ``def`` line."""
    body = function.body
    first = body[1] if is_docstring(body[0]) and len(body) > 1 else body[0]
    if first.lineno <= function.lineno:
        return []
    at = attached_start(ctx, first)
    return [Edit(at, at, f"{ctx.indent_of(first.lineno)}{line}{ctx.newline}")]
