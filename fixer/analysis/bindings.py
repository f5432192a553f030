"""What this file binds its names to: functions and methods it defines, names its imports bind,
and ``nn.Module`` instances (``model = Net()``, ``rnn, head = nn.LSTM(...), nn.Linear(...)``)."""

from __future__ import annotations

import ast
from typing import Iterator

from fixer.analysis.names import dotted, qualified
from fixer.analysis.project import imported_classes
from fixer.analysis.scopes import scopes, statement_index
from fixer.context import FileContext


def defined_functions(ctx: FileContext) -> set[str]:
    """Names of the functions and methods defined in this file."""
    return ctx.memo("defined_functions", lambda: {s.node.name for s in scopes(ctx) if not isinstance(s.node, ast.Module)})


def imported_names(ctx: FileContext) -> set[str]:
    """Names bound by imports (functions, classes, modules of other packages: unknown values)."""

    def compute() -> set[str]:
        found: set[str] = set()
        for node in statement_index(ctx).imports:
            for alias in node.names:
                found.add(alias.asname or alias.name.split(".")[0])
        return found

    return ctx.memo("imported_names", compute)


def module_classes(ctx: FileContext) -> set[str]:
    """Classes that subclass ``nn.Module`` (directly or through each other): this file's, and
    those imported from other project files (by the name that refers to them here)."""

    def compute() -> set[str]:
        ctx.memo("module_classes", set)  # while computing: an import cycle sees no classes yet
        found = {name for name, (other, cls) in imported_classes(ctx).items() if cls.name in module_classes(other)}
        classes = statement_index(ctx).classes
        changed = True
        while changed:
            changed = False
            for cls in classes:
                if cls.name in found:
                    continue
                for base in cls.bases:
                    base_name = qualified(ctx, base) or ""
                    if base_name.startswith("torch.nn.") or base_name in found or base_name in ("nn.Module", "Module"):
                        found.add(cls.name)
                        changed = True
                        break
        return found

    return ctx.memo("module_classes", compute)


def module_names(ctx: FileContext) -> set[str]:
    """Dotted names assigned an ``nn.Module`` anywhere in the file (``model = Net()``,
    ``self.fc = nn.Linear(...)``, ``net = nn.Sequential(...).to(device)``)."""

    def compute() -> set[str]:
        classes = module_classes(ctx)
        found: set[str] = set()
        for node in statement_index(ctx).assigns:
            for target in node.targets:
                for element, value in _unpacked(target, node.value):
                    name = dotted(element)
                    if name and _is_module_construction(ctx, value, classes):
                        found.add(name)
        return found

    return ctx.memo("module_names", compute)


def _unpacked(target: ast.expr, value: ast.expr) -> Iterator[tuple[ast.expr, ast.expr]]:
    """(target, value) pairs of an assignment, element by element for ``a, b = x, y``."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) and len(target.elts) == len(value.elts):
        for element, part in zip(target.elts, value.elts):
            yield from _unpacked(element, part)
    else:
        yield target, value


def _is_module_construction(ctx: FileContext, value: ast.expr, classes: set[str]) -> bool:
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("to", "cuda", "cpu", "train", "eval", "double", "float"):
        value = value.func.value
    if not isinstance(value, ast.Call):
        return False
    name = qualified(ctx, value.func) or ""
    if name.startswith("torch.nn.") and name.rsplit(".", 1)[-1][:1].isupper():
        return name.rsplit(".", 1)[-1] != "Parameter"
    return name in classes
