"""Rewriting one expression where it stands: ``value.detach()``, ``value.item()``, or another
expression in its place (a value recomputed where it is used)."""

from __future__ import annotations

import ast

from fixer.context import FileContext
from fixer.rule import Edit

_ATOMIC = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)  # ``x.detach()`` needs no parentheses


def method_edit(ctx: FileContext, expr: ast.expr, method: str) -> Edit:
    """``expr`` followed by ``.method()``, parenthesised unless it is a name, attribute, call or subscript."""
    start, end = ctx.span(expr)
    if isinstance(expr, _ATOMIC):
        return Edit(end, end, f".{method}()")
    return Edit(start, end, f"({ctx.source[start:end]}).{method}()")


def detach_edit(ctx: FileContext, expr: ast.expr) -> Edit:
    return method_edit(ctx, expr, "detach")


def replace_edit(ctx: FileContext, expr: ast.expr, text: str) -> Edit:
    start, end = ctx.span(expr)
    return Edit(start, end, text)
