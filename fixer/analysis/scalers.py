"""Gradient scalers (``torch.amp.GradScaler``), known by construction or by use, never by name."""

from __future__ import annotations

import ast
import re

from fixer.analysis.names import dotted, last_name
from fixer.analysis.scopes import statement_index
from fixer.context import FileContext
from fixer.nodes import walk

SCALER_TEXT = re.compile(r"\.scale\(|unscale_")  # a GradScaler's own methods


def is_scaler(ctx: FileContext, receiver: ast.expr) -> bool:
    """A gradient scaler: bound in this file to a ``GradScaler(...)``, or used as only one is
    (``X.scale(loss).backward()``, ``X.unscale_(opt)``), whatever its name."""
    name = dotted(receiver) or ""
    return name in _bound_scalers(ctx) or name in _scaling_receivers(ctx)


def _scaling_receivers(ctx: FileContext) -> frozenset[str]:
    def compute() -> frozenset[str]:
        found = set()
        if not ctx.mentions(ctx.tree, SCALER_TEXT):
            return frozenset()
        for call in walk(ctx.tree):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            inner = call.func.value
            if call.func.attr == "backward" and isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "scale":
                found.add(dotted(inner.func.value))
            elif call.func.attr == "unscale_":
                found.add(dotted(inner))
        return frozenset(found - {None})

    return ctx.memo("scaling_receivers", compute)


def _bound_scalers(ctx: FileContext) -> frozenset[str]:
    """Names this file binds to a ``GradScaler(...)``, whatever the names are."""

    def compute() -> frozenset[str]:
        return frozenset(
            name
            for assign in statement_index(ctx).assigns
            if len(assign.targets) == 1 and (name := dotted(assign.targets[0]))
            and isinstance(assign.value, ast.Call) and (last_name(assign.value.func) or "").endswith("GradScaler")
        )

    return ctx.memo("bound_scalers", compute)
