"""Giving a call a keyword argument, or taking one away (``create_graph=True``, ``retain_graph``)."""

from __future__ import annotations

import ast

from fixer.context import FileContext
from fixer.rule import Edit


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
