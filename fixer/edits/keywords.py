"""Giving a call a keyword argument, or taking one away (``create_graph=True``, ``retain_graph``):
``remove_keyword`` cuts the keyword and its comma, ``remove_keyword_keeping_layout`` (GF302's)
also keeps comments and the layout of the other arguments."""

from __future__ import annotations

import ast

from fixer.context import FileContext
from fixer.rule import Edit
from fixer.source import LINE_BREAK


def keyword_edit(ctx: FileContext, call: ast.Call, name: str, value: str = "True") -> Edit:
    """An edit that gives ``call`` the keyword ``name=value`` (replacing its value if present)."""
    existing = next((k for k in call.keywords if k.arg == name), None)
    if existing is not None:
        start, end = ctx.span(existing.value)
        return Edit(start, end, value)
    start, end = ctx.span(call)
    closing = end - 1  # the call's ")"
    items = [*call.args, *call.keywords]
    if not items:
        return Edit(closing, closing, f"{name}={value}")
    last_end = ctx.span(items[-1])[1]
    between = ctx.source[last_end:closing]
    if "," in between:
        comma = last_end + between.index(",") + 1
        return Edit(comma, comma, f" {name}={value}")
    return Edit(last_end, last_end, f", {name}={value}")


def remove_keyword(ctx: FileContext, call: ast.Call, name: str) -> Edit:
    """An edit that deletes the keyword ``name`` from ``call`` with its separating comma."""
    items = sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))
    keyword = next(k for k in call.keywords if k.arg == name)
    index = items.index(keyword)
    start, end = ctx.span(keyword)
    if index > 0:
        start = ctx.span(items[index - 1])[1]
    elif len(items) > 1:
        end = ctx.span(items[1])[0]
    return Edit(start, end, "")


def remove_keyword_keeping_layout(ctx: FileContext, call: ast.Call, keyword: ast.keyword) -> list[Edit]:
    """Edits deleting ``keyword`` and its comma from ``call``, keeping comments and the layout of
    the other arguments; a line left empty is removed, ``f(\\n    k=v\\n)`` becomes ``f()``."""
    source = ctx.source
    start, end = ctx.offset(keyword.lineno, keyword.col_offset), ctx.offset(keyword.end_lineno, keyword.end_col_offset)
    arguments = sorted([*call.args, *call.keywords], key=lambda n: (n.lineno, n.col_offset))
    position = arguments.index(keyword)
    after = _skip_blank(source, end)
    if len(arguments) == 1:
        open_paren = source.rindex("(", 0, start)
        close_paren = source.index(")", after) if source[after] != ")" else after
        if "#" not in source[open_paren:close_paren]:
            return [Edit(open_paren + 1, close_paren, "")]
    if source[after] == ",":
        stop = after + 1
        following = stop
        while following < len(source) and source[following] in " \t":
            following += 1
        if source[following:following + 1] not in ("#", "\n", "\r", ""):
            stop = following  # eat the space before the next argument, not before a comment
        line_start = ctx.line_start(keyword.lineno)
        line_end = ctx.line_end(ctx.row_col(stop)[0])
        if not source[line_start:start].strip() and not source[stop:line_end].strip():
            return [Edit(line_start, line_end, "")]  # the keyword had its own line
        if source[stop:stop + 1] == ")" and position > 0:
            while start > 0 and source[start - 1] in " \t":
                start -= 1  # f(a, retain_graph=True,) -> f(a,)
        return [Edit(start, stop, "")]
    if position == 0:
        return [Edit(start, end, "")]  # the only argument, with comments around it
    previous = arguments[position - 1]
    comma = _skip_blank(source, ctx.offset(previous.end_lineno, previous.end_col_offset))
    if "#" in source[comma:start]:
        return [Edit(comma, comma + 1, ""), Edit(start, end, "")]
    return [Edit(comma, end, "")]


def _skip_blank(source: str, index: int) -> int:
    """Index of the next character that is not whitespace, a line continuation or a comment."""
    while index < len(source):
        char = source[index]
        if char in " \t\r\n\\":
            index += 1
        elif char == "#":
            newline = LINE_BREAK.search(source, index)
            index = newline.start() if newline else len(source)
        else:
            break
    return index


def flag_on_edit(ctx: FileContext, call: ast.Call, flag: str, argument: ast.expr) -> Edit:
    """Turn a helper's flag on at ``call``: ``argument`` is the constant it passes (replaced by
    ``True``), or ``call`` itself where it passes none (``flag=True`` is added)."""
    if argument is call:
        return keyword_edit(ctx, call, flag)
    return Edit(*ctx.span(argument), "True")
