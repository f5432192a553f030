"""The definitions this file imports from other files of its project: the function
``imported_function`` finds for ``compute_loss(...)`` after ``from losses import compute_loss``,
the class ``imported_class`` finds for ``models.Net``, and the cheap tests from their text alone
(``imported_definition_matches``, ``imported_step_names``). A package's ``__init__.py`` that
imports the name from a module of its own is followed. Only the module an import names is read."""

from __future__ import annotations

import ast
import re
from typing import Optional

from fixer.analysis.names import dotted
from fixer.analysis.project_files import load_file, module_file
from fixer.analysis.project_text import STEP_CALL, definition_matches, file_matches, may_define
from fixer.analysis.scopes import Scope, scopes, statement_index
from fixer.context import FileContext

MAX_REEXPORTS = 3  # ``from .models import Net`` in a package's __init__.py, followed this deep


def imported_function(ctx: FileContext, func: ast.expr) -> Optional[Scope]:
    """The module-level function of another project file that ``func`` names, if any."""
    binding = _imported_binding(ctx, func)
    return _function_in(ctx.path, *binding) if binding else None


def imported_definition_matches(ctx: FileContext, func: ast.expr, pattern: "re.Pattern[bytes]", classes: bool = False) -> bool:
    """The text of the definition an imported ``func`` names (in a project file; with ``classes``,
    also a class) matches ``pattern``: a cheap test, with no parse, before reading it."""
    binding = _imported_binding(ctx, func)
    if binding is None:
        return False
    module, level, name = binding
    path = module_file(ctx.path, module, level)
    return bool(path) and definition_matches(path, name, pattern, classes)


def imported_module_matches(ctx: FileContext, func: ast.expr, pattern: "re.Pattern[bytes]") -> bool:
    """The text of the whole module an imported ``func`` comes from matches ``pattern`` (the
    definition may hand the work to another function of its module)."""
    binding = _imported_binding(ctx, func)
    path = module_file(ctx.path, binding[0], binding[1]) if binding is not None else None
    return bool(path) and file_matches(path, pattern)


def _imported_binding(ctx: FileContext, func: ast.expr) -> Optional[tuple[Optional[str], int, str]]:
    """(module, level, name) of the definition ``func`` names through an import of this file:
    ``f`` after ``from m import f`` (or ``as f``), ``m.f`` after ``import m``; None otherwise."""
    name = dotted(func)
    if name is None or ctx.path in ("-", "<stdin>"):
        return None
    head, _, rest = name.partition(".")
    if not rest:
        return _bindings(ctx)[0].get(head)
    module = _bindings(ctx)[1].get(head) if "." not in rest else None
    return (module, 0, rest) if module else None


def _bindings(ctx: FileContext) -> tuple[dict[str, tuple[Optional[str], int, str]], dict[str, str]]:
    """The file's first ``from m import f [as g]`` of each local name, as (module, level, f), and
    its first ``import m [as g]`` of each, as m: one pass over the imports, not one a question."""
    def compute() -> tuple[dict[str, tuple[Optional[str], int, str]], dict[str, str]]:
        names: dict[str, tuple[Optional[str], int, str]] = {}
        modules: dict[str, str] = {}
        for node in statement_index(ctx).imports:
            for alias in node.names:
                if isinstance(node, ast.ImportFrom):
                    names.setdefault(alias.asname or alias.name, (node.module, node.level, alias.name))
                else:
                    modules.setdefault(alias.asname or alias.name, alias.name)
        return names, modules

    return ctx.memo("imported_bindings", compute)


def imported_step_names(ctx: FileContext) -> set[str]:
    """Local names of imports whose definition (a function of a project file) or module
    (``import steps``) holds a backward pass (``STEP_CALL``), judged from text alone."""
    def compute() -> set[str]:
        found: set[str] = set()
        if ctx.path in ("-", "<stdin>"):
            return found
        for node in statement_index(ctx).imports:
            module = node.module if isinstance(node, ast.ImportFrom) else None
            for alias in node.names:
                local = alias.asname or alias.name.split(".")[0]
                if (module or alias.name).split(".")[0] == "torch" and not getattr(node, "level", 0):
                    continue  # the torch API, never a project's step function (as in graph.py)
                if isinstance(node, ast.ImportFrom):
                    path = module_file(ctx.path, node.module, node.level)
                    if path and file_matches(path, STEP_CALL) and definition_matches(path, alias.name, STEP_CALL):
                        found.add(local)
                else:
                    path = module_file(ctx.path, alias.name, 0)
                    if path and file_matches(path, STEP_CALL):
                        found.add(local)
        return found

    return ctx.memo("imported_step_names", compute)


def _function_in(importer: str, module: Optional[str], level: int, function: str) -> Optional[Scope]:
    found = _definition_in(importer, module, level, function, (ast.FunctionDef, ast.AsyncFunctionDef))
    if found is None:
        return None
    other, node = found
    return next((s for s in scopes(other) if s.node is node), None)


def imported_class(ctx: FileContext, name: str) -> Optional[tuple[FileContext, ast.ClassDef]]:
    """The class of another project file that ``name`` refers to here, as ``names.qualified``
    spells it (``models.Net`` for ``from models import Net`` and for ``import models``; ``Net``
    for ``from .models import Net``); None if it is not one. Only the module that binding names
    is read: never the rest of what the file imports."""
    if ctx.path in ("-", "<stdin>") or not name:
        return None
    return ctx.memo(("imported_class", name), lambda: _imported_class(ctx, name))


def _imported_class(ctx: FileContext, name: str) -> Optional[tuple[FileContext, ast.ClassDef]]:
    head, _, attr = name.rpartition(".")
    spelled, heads = _class_spellings(ctx)
    found = min(filter(None, [spelled.get(name), heads.get(head) if head else None]), default=None)
    if found is None:
        return None
    _, node, alias, whole = found
    if whole:
        return _definition_in(ctx.path, node.module, node.level, alias.name, ast.ClassDef)
    if isinstance(node, ast.ImportFrom):  # ``from . import models`` ... ``models.Net``
        return _class_in(module_file(ctx.path, ".".join(filter(None, [node.module, alias.name])), node.level), attr)
    return _class_in(module_file(ctx.path, alias.name, 0), attr)


def _class_spellings(ctx: FileContext) -> tuple[dict[str, tuple], dict[str, tuple]]:
    """The names through which the file's imports may refer to a class, each with the first import
    that gives it (its place among the imports first, to compare): the whole name (``models.Net``
    for ``from models import Net``, ``Net`` for ``from .models import Net``), and the head of a
    dotted name (``models`` for ``from . import models`` and for ``import models``)."""
    def compute() -> tuple[dict[str, tuple], dict[str, tuple]]:
        spelled: dict[str, tuple] = {}
        heads: dict[str, tuple] = {}
        place = 0
        for node in statement_index(ctx).imports:
            for alias in node.names:
                local, place = alias.asname or alias.name, place + 1
                if isinstance(node, ast.ImportFrom):
                    whole = f"{node.module}.{alias.name}" if node.module and not node.level else local
                    spelled.setdefault(whole, (place, node, alias, True))
                    if node.level:
                        heads.setdefault(local, (place, node, alias, False))
                else:
                    heads.setdefault(alias.name, (place, node, alias, False))
        return spelled, heads

    return ctx.memo("class_spellings", compute)


def _class_in(path: Optional[str], name: str) -> Optional[tuple[FileContext, ast.ClassDef]]:
    other = load_file(path) if path and name and may_define(path, name, ast.ClassDef, reexported=False) else None
    if other is not None:
        for cls in other.tree.body:
            if isinstance(cls, ast.ClassDef) and cls.name == name:
                return other, cls
    return None


def _definition_in(importer: str, module: Optional[str], level: int, name: str, kind, depth: int = 0):
    """(context, node) of the top-level ``kind`` definition ``name`` in the module ``importer``
    imports, following re-exports of a package's own modules; None if unknown."""
    path = module_file(importer, module, level)
    if path is None or not may_define(path, name, kind, reexported=depth < MAX_REEXPORTS):
        return None  # decided from the text: the module is parsed only when it may hold the name
    other = load_file(path)
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
