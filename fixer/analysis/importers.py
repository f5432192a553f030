"""Calls of a module-level function from the other files of its project that import it: the
callers of ``calc_gradient_penalty`` in ``train.py`` when ``helpers.py`` defines it.

A function's callers sit beside its module or above it: the files of its folder, and when that
folder is a package, of each package folder above and of the folder holding the top package (its
scripts). Only files whose text names the function and imports something are parsed, and a call
counts only when the caller's own imports resolve it to this very function (``imported_definitions``). Each
file read and each folder's set of Python files are recorded for the result cache (a new caller
changes the answer)."""

from __future__ import annotations

import ast
import os
import re
from typing import Iterator, NamedTuple, Optional

from fixer import depends
from fixer.analysis.call_sites import argument_of, call_sites, parameter_position, word_counts
from fixer.analysis.callees import imported_instance_of
from fixer.analysis.class_model import class_methods, constructions, constructor_field
from fixer.analysis.imported_definitions import imported_class, imported_function
from fixer.analysis.names import dotted, qualified
from fixer.analysis.project_files import bound_of, load_file, read_file
from fixer.analysis.project_text import word_matches
from fixer.analysis.scopes import Scope, scope_nodes, scope_of, scopes, statement_index
from fixer.context import FileContext

MAX_FILES = 400  # files of the neighbouring folders searched by text, at most
TRAINING_TEXT = re.compile(r"\.(?:backward|step|zero_grad)\s*\(|autograd\.(?:grad|backward)\b")
MAX_CALLING_FILES = 8  # files read for the calls of a function or of a class's methods; more: callers unknown


class ImportedCall(NamedTuple):
    ctx: FileContext  # the calling file
    scope: Scope  # the calling function (or module)
    call: Optional[ast.Call]  # None for an instance of the method's class handed on or stored


def importer_calls(ctx: FileContext, helper: Scope) -> list[ImportedCall]:
    """Calls of ``helper`` in other project files: of a module-level function of ``ctx``'s file,
    or of a method of one of its module-level classes through the instances an importing file
    constructs (``trainer = Trainer(...)`` ... ``trainer.step(x)``), in the files whose text names
    the method. An instance used there otherwise than through an attribute (``fit(trainer)``)
    gives a use with no call: whoever gets it may call the method anywhere."""
    node = helper.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or ctx.path in ("-", "<stdin>") or not os.path.isfile(ctx.path):
        return []
    cls = helper.class_node
    if cls is not None:
        if ctx.parent(node) is not cls or not helper.self_name or node.decorator_list or node.name.startswith("__"):
            return []  # (a special method is never called by its name)
        if not ctx.mentions(node, TRAINING_TEXT):
            return []  # cheap: only a method that trains (backward, step, zero_grad) is followed into scripts
        return ctx.memo(("importer_method_calls", id(node)), lambda: list(_method_calls_from(ctx, cls, node.name)))
    if ctx.parent(node) is not ctx.tree:
        return []
    here = os.path.abspath(ctx.path)
    return ctx.memo(("importer_calls", id(node)), lambda: list(_calls_from(ctx, here, node.name)))


def _method_calls_from(ctx: FileContext, cls: ast.ClassDef, method: str) -> Iterator[ImportedCall]:
    here = os.path.abspath(ctx.path)
    calling = set(_paths_naming(here, method))  # only files whose text names the method can call it
    constructing = re.compile(rb"=\s*(?:\w+\.)*%s\s*\(" % re.escape(cls.name.encode()))  # and assigns an instance
    paths = [p for p in _paths_naming(here, cls.name) if p in calling and constructing.search(read_file(p))]
    if len(paths) > MAX_CALLING_FILES:
        yield ImportedCall(ctx, scopes(ctx)[0], None)  # a class used across a library: its callers stay unknown
        return
    for path in paths:
        other = load_file(path)
        if other is None or not _imports_name(other, cls.name):
            continue
        instances = _instances_in(other, here, cls.name)
        if not instances:
            continue
        named = re.compile(r"\b(?:%s)\b" % "|".join(map(re.escape, sorted(instances))))
        for scope in scopes(other):
            if not other.mentions(scope.node, named):
                continue  # only the scopes whose lines name an instance are walked
            for node in scope_nodes(scope):
                if not (isinstance(node, ast.Name) and node.id in instances and isinstance(node.ctx, ast.Load)):
                    continue
                if not _is_class(imported_instance_of(other, scope, node.id), here, cls.name):
                    continue
                use = other.parent(node)
                if not isinstance(use, ast.Attribute):
                    yield ImportedCall(other, scope, None)
                elif use.attr == method:
                    call = other.parent(use)
                    yield ImportedCall(other, scope, call if isinstance(call, ast.Call) and call.func is use else None)


def _calls_from(ctx: FileContext, here: str, name: str):
    stem = os.path.basename(os.path.dirname(here) if os.path.basename(here) == "__init__.py" else os.path.splitext(here)[0]).encode()
    paths = [p for p in _paths_naming(here, name) if _names(read_file(p), stem)]  # (an import of the module names it)
    if len(paths) > MAX_CALLING_FILES:
        yield ImportedCall(ctx, scopes(ctx)[0], None)  # a function used across a library: its callers stay unknown
        return
    word = re.compile(r"\b%s\b" % re.escape(name))
    for other in filter(None, map(load_file, paths)):
        for scope in scopes(other):
            if not other.mentions(scope.node, word):
                continue
            for call in scope_nodes(scope):
                if isinstance(call, ast.Call) and (dotted(call.func) or "").rpartition(".")[2] == name:
                    callee = imported_function(other, call.func)
                    if callee is not None and callee.ctx is not None and os.path.abspath(callee.ctx.path) == here and callee.node.name == name:
                        yield ImportedCall(other, scope, call)


def _naming_files(here: str, name: str) -> Iterator[FileContext]:
    """The parsed neighbours of module ``here`` whose text imports something and names ``name``."""
    for path in _paths_naming(here, name):
        other = load_file(path)
        if other is not None:
            yield other


def _paths_naming(here: str, name: str) -> tuple[str, ...]:
    """The neighbours of module ``here`` (itself excluded) whose text imports something and names ``name``."""
    return tuple(p for p in _folder_paths_naming(os.path.dirname(here), name) if p != here)


@depends.remembered
def _folder_paths_naming(folder: str, name: str) -> tuple[str, ...]:
    """(Per process and folder: each neighbour is read once per name asked, not once per caller.)"""
    word = name.encode()
    return tuple(p for p in _neighbours(os.path.join(folder, "__init__.py")) if b"import" in (data := read_file(p)) and _names(data, word))


def neighbours_naming(ctx: FileContext, name: str) -> list[FileContext]:
    """The project files around ``ctx``'s module (``_neighbours``, itself excluded) whose text
    names ``name`` as a word, imports or not (a helper that stores ``obj.name`` need import nothing)."""
    if ctx.path in ("-", "<stdin>") or not os.path.isfile(ctx.path):
        return []
    here, word = os.path.abspath(ctx.path), name.encode()
    paths = [p for p in _neighbours(os.path.join(os.path.dirname(here), "__init__.py")) if p != here and _names(read_file(p), word)]
    return [other for other in map(load_file, paths) if other is not None]


def _names(data: bytes, name: bytes) -> bool:
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


@depends.remembered
def _neighbours(here: str) -> tuple[str, ...]:
    """The Python files of the module's folder, of each package folder above it and of the folder
    holding its top package, within the project's bound; at most MAX_FILES."""
    folder = os.path.dirname(here)
    bound = bound_of(folder)
    folders = [folder]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parent = os.path.dirname(folder)
        if parent == folder or bound is not None and not (parent + os.sep).startswith(bound.rstrip(os.sep) + os.sep) and parent != bound:
            break
        folder = parent
        folders.append(folder)
    found: list[str] = []
    for each in folders:
        names = depends.python_files(each)
        depends.modules_listed(each, names)
        found += [os.path.join(each, n) for n in names]
    return tuple(found[:MAX_FILES])


def project_call_sites(ctx: FileContext, scope: Scope) -> Iterator[tuple[FileContext, Scope, Optional[ast.Call]]]:
    """``call_sites.call_sites`` with each caller's file (this one), then the calls of the
    importing files for a module-level function: (caller's file, caller, call or None for a use
    that is not a call)."""
    for caller, call in call_sites(ctx, scope):
        yield ctx, caller, call
    for imported in importer_calls(ctx, scope):
        yield imported.ctx, imported.scope, imported.call


def class_importers(ctx: FileContext, cls: ast.ClassDef) -> list[FileContext]:
    """The other project files that use the module-level class ``cls`` of ``ctx``'s file through
    their imports (``from models import Net`` ... ``Net()``)."""

    if ctx.parent(cls) is not ctx.tree or ctx.path in ("-", "<stdin>") or not os.path.isfile(ctx.path):
        return []
    here, name = os.path.abspath(ctx.path), cls.name

    def compute() -> list[FileContext]:
        return [other for other in _naming_files(here, name) if _imports_name(other, name) and _class_uses(other, here, name)]

    return ctx.memo(("class_importers", id(cls)), compute)


def project_constructions(ctx: FileContext, cls: ast.ClassDef) -> Optional[list[tuple[FileContext, Scope, ast.Call]]]:
    """Every ``x = Cls(...)`` (one plain name) of the module-level class ``cls``, in its own file
    and in the files importing it: (file, scope, call). None when some use of the class is not
    such a construction (passed on, subclassed, stored on an object): then what its instances
    are given is unknown."""
    if ctx.parent(cls) is not ctx.tree:
        return None

    def compute() -> Optional[list[tuple[FileContext, Scope, ast.Call]]]:
        local = constructions(ctx, cls)
        if local is None and word_counts(ctx)[cls.name] != 1:
            return None
        if any(len(t := ctx.parent(call).targets) != 1 or not isinstance(t[0], ast.Name) for call in local or []):
            return None  # kept on an object or unpacked: followed no further
        found = [(ctx, scope_of(ctx, ctx.parent(call)), call) for call in local or []]
        for other in class_importers(ctx, cls):
            for use in _class_uses(other, os.path.abspath(ctx.path), cls.name):
                call = other.parent(use)
                assign = other.parent(call)
                if not (isinstance(call, ast.Call) and call.func is use and isinstance(assign, ast.Assign) and assign.value is call):
                    return None
                if len(assign.targets) != 1 or not isinstance(assign.targets[0], ast.Name):
                    return None
                found.append((other, scope_of(other, assign), call))
        return found

    return ctx.memo(("project_constructions", id(cls)), compute)


def _instances_in(other: FileContext, here: str, name: str) -> set[str]:
    """Names ``other`` assigns ``Cls(...)`` of the class ``name`` of module ``here`` (from its
    assignments alone)."""
    found = set()
    for assign in statement_index(other).assigns:
        value = assign.value
        if isinstance(value, ast.Call) and (dotted(value.func) or "").rpartition(".")[2] == name:
            if _is_class(imported_class(other, qualified(other, value.func) or ""), here, name):
                found |= {t.id for t in assign.targets if isinstance(t, ast.Name)}
    return found


def _is_class(known: Optional[tuple[FileContext, ast.ClassDef]], here: str, name: str) -> bool:
    """``known`` (a class as ``imported_class`` finds it) is the class ``name`` of module ``here``."""
    return known is not None and os.path.abspath(known[0].path) == here and known[1].name == name


def _imports_name(other: FileContext, name: str) -> bool:
    """``other`` may refer to ``name`` through an import: ``from m import name [as x]``, or
    ``m.name`` after importing a module (a cheap test before walking it)."""
    imports = statement_index(other).imports
    return any(isinstance(i, ast.ImportFrom) and any(a.name == name for a in i.names) for i in imports) or f".{name}" in other.source


def _class_uses(other: FileContext, here: str, name: str) -> list[ast.expr]:
    """The expressions of ``other`` that name the class ``name`` of module ``here`` (its imports
    excluded)."""
    def compute() -> list[ast.expr]:
        imports = statement_index(other).imports
        local = {a.asname or a.name for i in imports if isinstance(i, ast.ImportFrom) for a in i.names if a.name == name}
        modules = {(a.asname or a.name).partition(".")[0] for i in imports for a in i.names}  # ``models.Net``
        uses = []
        for node in ast.walk(other.tree):
            if isinstance(node, ast.Name) and node.id in local or (
                isinstance(node, ast.Attribute) and node.attr == name and (dotted(node.value) or "").partition(".")[0] in modules
            ):
                if _is_class(imported_class(other, qualified(other, node) or ""), here, name):
                    uses.append(node)
        return uses

    return other.memo(("class_uses", here, name), compute)


def construction_arguments(ctx: FileContext, cls: ast.ClassDef, attr: str) -> Optional[list[tuple[FileContext, Scope, ast.expr]]]:
    """What each construction of ``cls`` in the project gives for the field ``self.attr`` the
    object keeps for life (``self.model = model`` in ``__init__``, never rebound): (file, scope,
    argument); None when a construction is unknown or passes it through ``*``/``**``."""
    param = constructor_field(ctx, cls, attr)
    sites = project_constructions(ctx, cls) if param is not None else None
    if not sites:
        return None
    position = parameter_position(class_methods(ctx, cls)["__init__"], param)
    found = []
    for own, scope, call in sites:
        given = argument_of(call, param, -1 if position is None else position)
        if not isinstance(given, ast.expr):
            return None  # not given (its default), or through ``*``/``**``
        found.append((own, scope, given))
    return found
