"""Functions imported from other files of the same project: ``from losses import compute_loss``
(or ``from .losses import ...``, ``import losses``) resolves to ``losses.py`` beside the file or in
its package, which is parsed once per process. Anything that cannot be found or parsed is unknown."""

from __future__ import annotations

import ast
import os
import warnings
from typing import Optional

from fixer.analysis.names import dotted
from fixer.analysis.scopes import Scope, scopes, statement_index
from fixer.context import FileContext
from fixer.source import SourceError, decode, read_bytes

MAX_BYTES = 1_000_000
_loaded: dict[str, Optional[FileContext]] = {}


def called_function(ctx: FileContext, scope: Scope, func: ast.expr, imported: bool = True) -> Optional[Scope]:
    """The function a call runs, when it is in this file (``helper(...)``, ``self.method(...)``)
    or (with ``imported``) imported from another project file; None if unknown."""
    name = dotted(func)
    if name is None:
        return None
    head, _, attr = name.partition(".")
    for candidate in _functions_named(ctx).get(attr or head, ()):
        node = candidate.node
        if not attr and node.name == head and candidate.class_node is None and ctx.parent(node) is ctx.tree:
            return candidate
        if attr and "." not in attr and head == scope.self_name and node.name == attr and candidate.class_node is scope.class_node:
            return candidate
    return imported_function(ctx, func) if imported else None


def _functions_named(ctx: FileContext) -> dict[str, list[Scope]]:
    def compute() -> dict[str, list[Scope]]:
        found: dict[str, list[Scope]] = {}
        for scope in scopes(ctx):
            if not isinstance(scope.node, ast.Module):
                found.setdefault(scope.node.name, []).append(scope)
        return found

    return ctx.memo("functions_named", compute)


def imported_function(ctx: FileContext, func: ast.expr) -> Optional[Scope]:
    """The module-level function of another project file that ``func`` names, if any."""
    name = dotted(func)
    if name is None or ctx.path in ("-", "<stdin>"):
        return None
    head, _, rest = name.partition(".")
    for node in statement_index(ctx).imports:
        if isinstance(node, ast.ImportFrom) and not rest:
            for alias in node.names:
                if (alias.asname or alias.name) == head:
                    return _function_in(ctx.path, node.module, node.level, alias.name)
        elif isinstance(node, ast.Import) and rest and "." not in rest:
            for alias in node.names:
                if (alias.asname or alias.name) == head:
                    return _function_in(ctx.path, alias.name, 0, rest)
    return None


def _function_in(importer: str, module: Optional[str], level: int, function: str) -> Optional[Scope]:
    path = _module_file(importer, module, level)
    other = _load(path) if path else None
    if other is None:
        return None
    for scope in scopes(other):
        node = scope.node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function and other.parent(node) is other.tree:
            return scope
    return None


def _module_file(importer: str, module: Optional[str], level: int) -> Optional[str]:
    parts = module.split(".") if module else []
    folder = os.path.dirname(os.path.abspath(importer))
    if level:
        for _ in range(level - 1):
            folder = os.path.dirname(folder)
        bases = [folder]
    else:
        bases = [folder]  # the importer's folder, then each package level above it
        while os.path.isfile(os.path.join(folder, "__init__.py")):
            folder = os.path.dirname(folder)
            bases.append(folder)
    for base in bases:
        stem = os.path.join(base, *parts)
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            if parts and os.path.isfile(candidate):
                return candidate
    return None


def _load(path: str) -> Optional[FileContext]:
    if path not in _loaded:
        _loaded[path] = None
        try:
            if os.path.getsize(path) <= MAX_BYTES:
                source = decode(read_bytes(path))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _loaded[path] = FileContext(path, source.text, ast.parse(source.text, filename=path), source.newline)
        except (OSError, SourceError, SyntaxError, ValueError, RecursionError):
            pass
    return _loaded[path]
