"""Adding a statement on a line of its own, in the indentation of the statement it goes before
or after."""

from __future__ import annotations

import ast

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
