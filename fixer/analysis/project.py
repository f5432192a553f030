"""Functions and classes imported from other files of the same project: ``from losses import
compute_loss`` (or ``from .losses import ...``, ``import losses``) resolves to ``losses.py`` beside
the file or in its package, which is parsed once per process; a package's ``__init__.py`` that
imports the name from a module of its own is followed. Anything that cannot be found or parsed is
unknown. Every file looked for or read is reported to ``fixer.depends`` (the result cache's
record of what a file's result depends on)."""

from __future__ import annotations

import ast
import os
import warnings
from typing import Optional

from fixer import depends
from fixer.analysis.names import dotted
from fixer.analysis.scopes import Scope, scopes, statement_index
from fixer.context import FileContext
from fixer.source import SourceError, decode

MAX_BYTES = 1_000_000
MAX_REEXPORTS = 3  # ``from .models import Net`` in a package's __init__.py, followed this deep
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
    found = _definition_in(importer, module, level, function, (ast.FunctionDef, ast.AsyncFunctionDef))
    if found is None:
        return None
    other, node = found
    return next((s for s in scopes(other) if s.node is node), None)


def imported_classes(ctx: FileContext) -> dict[str, tuple[FileContext, ast.ClassDef]]:
    """Classes of other project files this file imports, by their name as ``names.qualified``
    gives it (``models.Net`` for ``from models import Net`` and for ``import models``; ``Net``
    for ``from .models import Net``)."""

    def compute() -> dict[str, tuple[FileContext, ast.ClassDef]]:
        found: dict[str, tuple[FileContext, ast.ClassDef]] = {}
        if ctx.path in ("-", "<stdin>"):
            return found
        for node in statement_index(ctx).imports:
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    cls = _definition_in(ctx.path, node.module, node.level, alias.name, ast.ClassDef)
                    local = alias.asname or alias.name
                    if cls is not None:
                        found[f"{node.module}.{alias.name}" if node.module and not node.level else local] = cls
                    elif node.level:  # ``from . import models``: a module of the package
                        _add_classes(found, local, _module_file(ctx.path, ".".join(filter(None, [node.module, alias.name])), node.level))
            else:
                for alias in node.names:
                    _add_classes(found, alias.name, _module_file(ctx.path, alias.name, 0))
        return found

    return ctx.memo("imported_classes", compute)


def _add_classes(found: dict, prefix: str, path: Optional[str]) -> None:
    other = _load(path) if path else None
    if other is not None:
        for cls in other.tree.body:
            if isinstance(cls, ast.ClassDef):
                found[f"{prefix}.{cls.name}"] = (other, cls)


def _definition_in(importer: str, module: Optional[str], level: int, name: str, kind, depth: int = 0):
    """(context, node) of the top-level ``kind`` definition ``name`` in the module ``importer``
    imports, following re-exports of a package's own modules; None if unknown."""
    path = _module_file(importer, module, level)
    other = _load(path) if path else None
    if other is None:
        return None
    for node in other.tree.body:
        if isinstance(node, kind) and node.name == name:
            return other, node
    if depth >= MAX_REEXPORTS:
        return None
    for node in other.tree.body:  # re-exported: ``from .models import Net`` in __init__.py
        if isinstance(node, ast.ImportFrom) and node.level:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _definition_in(path, node.module, node.level, alias.name, kind, depth + 1)
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
        while depends.exists(os.path.join(folder, "__init__.py")):
            folder = os.path.dirname(folder)
            bases.append(folder)
    for base in bases:
        stem = os.path.join(base, *parts)
        package = os.path.join(stem, "__init__.py")
        if not parts:  # ``from . import x``: the package itself
            return package if level and depends.exists(package) else None
        for candidate in (stem + ".py", package):
            if depends.exists(candidate):
                return candidate
    return None


def _load(path: str) -> Optional[FileContext]:
    if path not in _loaded:
        _loaded[path] = None
        try:
            if os.path.getsize(path) <= MAX_BYTES:
                source = decode(depends.read(path))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _loaded[path] = FileContext(path, source.text, ast.parse(source.text, filename=path), source.newline)
        except (OSError, SourceError, SyntaxError, ValueError, RecursionError):
            pass
    depends.note(path)  # also on later calls: this analysis used the content loaded first
    return _loaded[path]
