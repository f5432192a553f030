"""Calls of a module-level function from the other files of its project that import it: the
callers of ``calc_gradient_penalty`` in ``train.py`` when ``helpers.py`` defines it
(``function_calls``), every use seen (a use that is not a call gives None: an unknown caller).

A function's callers sit beside its module or above it (``project_text.neighbour_files``). Only
files whose text names the function and its module and imports something are parsed, and a use
counts only when the caller's own imports resolve it to this very function
(``imported_definitions``). Each file read and each folder's set of Python files are recorded for
the result cache (a new caller changes the answer)."""

from __future__ import annotations

import ast
import os
import re
from typing import NamedTuple, Optional

from fixer import depends
from fixer.analysis.imported_definitions import imported_function
from fixer.analysis.project_files import load_file, module_file, read_file
from fixer.analysis.project_text import neighbour_files, word_matches
from fixer.analysis.scopes import Scope, scope_nodes, scopes, statement_index
from fixer.context import FileContext

MAX_CALLING_FILES = 8  # files read for the calls of a function or of a class's methods; more: callers unknown


class ImportedCall(NamedTuple):
    ctx: FileContext  # the calling file
    scope: Scope  # the calling function (or module)
    call: Optional[ast.Call]  # None for an instance of the method's class handed on or stored


def function_calls(ctx: FileContext, function: Scope) -> list[ImportedCall]:
    """The uses of the module-level ``function`` of ``ctx``'s file in the files importing it."""
    node = function.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or ctx.parent(node) is not ctx.tree \
            or ctx.path in ("-", "<stdin>") or not os.path.isfile(ctx.path):
        return []
    here = os.path.abspath(ctx.path)
    return ctx.memo(("importer_calls", id(node)), lambda: list(_calls_from(ctx, here, node.name)))


def _calls_from(ctx: FileContext, here: str, name: str):
    """Every use of the function in the files that import its module: a call, or None for any other
    use (``fn = helpers.f``, passed on), for a star import of the module (any use may be it), and
    for an import the file never uses in a module imported in turn (a re-export: its users are
    out of sight)."""
    stem = os.path.basename(os.path.dirname(here) if os.path.basename(here) == "__init__.py" else os.path.splitext(here)[0]).encode()
    paths = [p for p in paths_naming(here, name) if names_word(read_file(p), stem)]  # (an import of the module names it)
    if len(paths) > MAX_CALLING_FILES:
        yield ImportedCall(ctx, scopes(ctx)[0], None)  # a function used across a library: its callers stay unknown
        return
    word = re.compile(r"\b%s\b" % re.escape(name))
    for other in filter(None, map(load_file, paths)):
        starred = any(isinstance(i, ast.ImportFrom) and any(a.name == "*" for a in i.names) and module_file(other.path, i.module, i.level) == here
                      for i in statement_index(other).imports)
        imported = _imported_here(other, here, name)
        used = False
        for scope in scopes(other):
            if not other.mentions(scope.node, word):
                continue
            for node in scope_nodes(scope):
                if not (isinstance(node, ast.Name) and node.id == name or isinstance(node, ast.Attribute) and node.attr == name):
                    continue
                callee = imported_function(other, node)
                if not (starred and isinstance(node, ast.Name) or callee is not None and callee.ctx is not None
                        and os.path.abspath(callee.ctx.path) == here and callee.node.name == name):
                    continue
                used = True
                call = other.parent(node)
                yield ImportedCall(other, scope, call if isinstance(call, ast.Call) and call.func is node else None)
        if imported and not used and _reexported(other, here, name):
            yield ImportedCall(other, scopes(other)[0], None)  # imported, never used, and imported in turn: a re-export


def _reexported(other: FileContext, here: str, name: str) -> bool:
    """A file around ``other`` (the defining module ``here`` aside) names both ``other``'s module
    and ``name``: it may import the function through ``other``."""
    path = os.path.abspath(other.path)
    stem = os.path.basename(os.path.dirname(path) if os.path.basename(path) == "__init__.py" else os.path.splitext(path)[0])
    return any(p != here and names_word(read_file(p), stem.encode()) for p in paths_naming(path, name))


def _imported_here(other: FileContext, here: str, name: str) -> bool:
    """``other`` imports the function ``name`` of module ``here`` by name (``from m import name``)."""
    return any(isinstance(i, ast.ImportFrom) and any(a.name == name for a in i.names) and module_file(other.path, i.module, i.level) == here
               for i in statement_index(other).imports)


def paths_naming(here: str, name: str) -> tuple[str, ...]:
    """The neighbours of module ``here`` (itself excluded) whose text imports something and names ``name``."""
    return tuple(p for p in _folderpaths_naming(os.path.dirname(here), name) if p != here)


@depends.remembered
def _folderpaths_naming(folder: str, name: str) -> tuple[str, ...]:
    """(Per process and folder: each neighbour is read once per name asked, not once per caller.)"""
    word = name.encode()
    return tuple(p for p in neighbour_files(os.path.join(folder, "__init__.py")) if b"import" in (data := read_file(p)) and names_word(data, word))


def names_word(data: bytes, name: bytes) -> bool:
    """``name`` occurs in ``data`` as a whole word (found at memchr speed, then its edges checked;
    an ASCII name by ``re``, which goes on from an occurrence inside a word without Python's loop).
    Most files asked hold no occurrence at all: ``in`` says so first, skipping ahead by the name's
    length where ``re`` stops at every byte that starts it (``_`` in most names)."""
    if name not in data:
        return False
    if name.isascii() and name and (name[-1:].isalnum() or name[-1:] == b"_"):
        return next(word_matches(re.escape(name) + rb"\b", data), None) is not None
    at = data.find(name)
    while at >= 0:
        before = data[at - 1 : at] if at else b" "
        after = data[at + len(name) : at + len(name) + 1] or b" "
        if not (before.isalnum() or before == b"_") and not (after.isalnum() or after == b"_"):
            return True
        at = data.find(name, at + 1)
    return False
