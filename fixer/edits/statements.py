"""Adding a statement on a line of its own, in the indentation of the statement it goes before
or after (or of a function's first statement); a statement moved one level in under a ``with``
(``torch.no_grad()``), or moved before or after another (``zero_grad()``); a statement deleted
(a premature ``step()``), with the shared guard that holds only it (``if i % k == 0: loss.backward()``)."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.passes import guarded_unit
from fixer.analysis.scopes import enclosing_block
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
    removed = Edit(ctx.line_start(stmt.lineno), ctx.line_end(stmt.lineno), "")
    text = ctx.text(stmt)
    return [removed, insert_after(ctx, anchor, text) if after else insert_before(ctx, anchor, text)]


def insert_at_top(ctx: FileContext, function: ast.AST, line: str) -> list[Edit]:
    """Insert ``line`` before the function's first statement (after its docstring), unless the
    body sits on the ``def`` line."""
    body = function.body
    first = body[1] if is_docstring(body[0]) and len(body) > 1 else body[0]
    if first.lineno <= function.lineno:
        return []
    at = attached_start(ctx, first)
    return [Edit(at, at, f"{ctx.indent_of(first.lineno)}{line}{ctx.newline}")]


def delete_statement(ctx: FileContext, stmt: ast.stmt, keep_comment: bool = True) -> Optional[Edit]:
    """Remove ``stmt``'s lines, or those of the shared guard holding only it (passes.guarded_unit:
    the guard alone would be left without a body), keeping a trailing comment as a line of its
    own (``keep_comment``); None when it shares its lines or is the only statement of its block."""
    unit = guarded_unit(ctx, stmt)
    block = enclosing_block(ctx, unit)
    if not ctx.is_own_line(unit) or not block or all(s is unit for s in block):
        return None
    start, end = ctx.line_start(unit.lineno), ctx.line_end(unit.end_lineno)
    tail = ctx.source[ctx.offset(unit.end_lineno, unit.end_col_offset) : end].strip()
    text = f"{ctx.indent_of(unit.lineno)}{tail}{ctx.newline}" if keep_comment and tail.startswith("#") else ""
    return Edit(start, end, text)
