"""Rewriting one expression where it stands: ``value.detach()``, ``value.item()``, or another
expression in its place (a value recomputed where it is used)."""

from __future__ import annotations

import ast
from typing import Optional

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


def detached_text(text: str, shape: str) -> Optional[str]:
    """``text`` with every tensor it holds detached, by what it is: a tensor, a tuple of tensors (an
    LSTM's ``(h, c)``), a dict of tensors (a state ``{"h": h, "z": z}``); None when unknown."""
    if shape == "tensor":
        return f"{text}.detach()"
    if shape == "tuple":
        item = "t" if text == "h" else "h"
        return f"tuple({item}.detach() for {item} in {text})"
    if shape == "dict":
        return f"{{k: v.detach() for k, v in {text}.items()}}"
    return None
