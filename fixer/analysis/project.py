"""Functions and classes imported from other files of the same project: ``from losses import
compute_loss`` (or ``from .losses import ...``, ``import losses``) resolves to ``losses.py`` beside
the file or in its package, which is parsed once per process; a package's ``__init__.py`` that
imports the name from a module of its own is followed. Anything that cannot be found or parsed is
unknown. Every file read or looked for, and every ``.git`` looked for, is reported to
``fixer.depends`` (the result cache's record of what a file's result depends on) on every call:
the per-process memos here are ``depends.remembered``, and a loaded module's context records
again, with each memo answer, the files that answer read."""

from __future__ import annotations

import ast
import functools
import os
import re
from typing import Iterator, Optional

from fixer import depends
from fixer.analysis.names import dotted, last_name, qualified
from fixer.analysis.scopes import Scope, scope_nodes, scopes, statement_index
from fixer.context import FileContext
from fixer.nodes import parse
from fixer.source import SourceError, decode

MAX_BYTES = 1_000_000
# a training step frees its graph with a backward pass (``autograd.grad`` stops at its inputs and
# is never one): the text a step function's definition must hold
STEP_ALTERNATIVES = (rb"\.backward\s*\(", rb"autograd\.backward\b", rb"manual_backward")
STEP_CALL = re.compile(b"|".join(STEP_ALTERNATIVES))
STEP_PARTS = tuple(re.compile(part) for part in STEP_ALTERNATIVES)  # each found at memchr speed
MAX_REEXPORTS = 3  # ``from .models import Net`` in a package's __init__.py, followed this deep
MAX_LOADED = 2048  # parsed project files kept between files: a batch of many repositories stays in bounded memory
_loaded: dict[str, tuple[Optional[FileContext], Optional[dict]]] = depends.kept({})  # path -> (context, the files its loading read)
_root: Optional[str] = None  # the project of the files being analysed (set_root)


def called_function(ctx: FileContext, scope: Scope, func: ast.expr, imported: bool = True) -> Optional[Scope]:
    """The function a call runs, when it is in this file (``helper(...)``, ``self.method(...)``)
    or (with ``imported``) imported from another project file; None if unknown."""
    name = dotted(func)
    if name is None:
        return None
    head, _, attr = name.partition(".")
    instance_of = None
    for candidate in _functions_named(ctx).get(attr or head, ()):
        node = candidate.node
        if not attr and node.name == head and candidate.class_node is None and ctx.parent(node) is ctx.tree:
            return candidate
        if attr and "." not in attr and head == scope.self_name and node.name == attr and candidate.class_node is scope.class_node:
            return candidate
        if attr and "." not in attr and head != scope.self_name and candidate.class_node is not None:
            instance_of = instance_of or [_instance_of(ctx, scope, head)]
            if candidate.class_node is instance_of[0]:
                return candidate
    if not imported:
        return None
    if attr and "." not in attr and head != scope.self_name:
        return _imported_method(ctx, scope, head, attr)
    return imported_function(ctx, func)


def _imported_method(ctx: FileContext, scope: Scope, name: str, method: str) -> Optional[Scope]:
    """``name.method`` when ``name`` holds an instance of a class of another project file."""
    known = imported_instance_of(ctx, scope, name)
    if known is None:
        return None
    other, cls = known
    found = [s for s in scopes(other) if s.class_node is cls and s.self_name and s.node.name == method and other.parent(s.node) is cls]
    return found[0] if len(found) == 1 else None


def _instance_of(ctx: FileContext, scope: Scope, name: str) -> Optional[ast.ClassDef]:
    """The class of this file that ``name`` holds an instance of: every binding of it in the scope
    (or, when the scope binds it nowhere, in the module) is ``Cls(...)`` of one module-level class."""
    from fixer.analysis.instances import instance_class  # instances reads the graph facts

    def compute() -> Optional[ast.ClassDef]:
        classes = {id(c): c for c in (instance_class(ctx, v) for v in _bound_values(ctx, scope, name) or [None])}
        return next(iter(classes.values())) if len(classes) == 1 else None

    return ctx.memo(("instance_of", id(scope.node), name), compute)


def imported_instance_of(ctx: FileContext, scope: Scope, name: str) -> Optional[tuple[FileContext, ast.ClassDef]]:
    """The class of another project file that ``name`` holds an instance of: every binding of it
    (as ``_instance_of`` finds them) is ``Cls(...)`` of one imported class."""
    if name not in names_constructing_imported(ctx):
        return None  # cheap: no assignment of the file gives the name an imported class's instance

    def compute() -> Optional[tuple[FileContext, ast.ClassDef]]:
        values = _bound_values(ctx, scope, name)
        if not values or not all(isinstance(v, ast.Call) for v in values):
            return None
        found = [imported_class(ctx, qualified(ctx, v.func) or "") for v in values]
        if any(k is None for k in found) or len({(os.path.abspath(k[0].path), k[1].name) for k in found}) != 1:
            return None
        return found[0]

    return ctx.memo(("imported_instance_of", id(scope.node), name), compute)


def names_constructing_imported(ctx: FileContext) -> frozenset[str]:
    """Names some assignment of the file binds to ``Cls(...)`` of an imported CapWords name: those
    that may hold an instance of a class of another project file (one pass over the file's
    assignments, reading no other file)."""
    return _imported_constructions(ctx)[0]


def constructed_imports(ctx: FileContext) -> frozenset[str]:
    """The imported names (the first part of ``Cls`` or ``mod.Cls``) some assignment of the file
    calls as ``Cls(...)`` with a CapWords name, whatever it assigns to."""
    return _imported_constructions(ctx)[1]


def _imported_constructions(ctx: FileContext) -> tuple[frozenset[str], frozenset[str]]:
    def compute() -> tuple[frozenset[str], frozenset[str]]:
        imported = {(a.asname or a.name).partition(".")[0] for i in statement_index(ctx).imports for a in i.names}
        names: set[str] = set()
        roots: set[str] = set()
        for a in statement_index(ctx).assigns if imported else ():
            root = (dotted(a.value.func) or "").partition(".")[0] if isinstance(a.value, ast.Call) else ""
            if root in imported and (last_name(a.value.func) or "")[:1].isupper():  # cheap: CapWords, as classes are named
                roots.add(root)
                names |= {t.id for t in a.targets if isinstance(t, ast.Name)}
        return frozenset(names), frozenset(roots)

    return ctx.memo("imported_constructions", compute)


def _bound_values(ctx: FileContext, scope: Scope, name: str) -> Optional[list[Optional[ast.expr]]]:
    """The values ``name`` is bound to in the scope, or (when the scope binds it nowhere) in the
    module; None for a parameter or a ``global``/``nonlocal`` name; a binding that is not a plain
    assignment gives None in the list."""

    def bound_values(where: Scope) -> Optional[list[Optional[ast.expr]]]:
        values: list[Optional[ast.expr]] = []
        for node in scope_nodes(where):
            if isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
                return None
            if isinstance(node, ast.Name) and node.id == name and not isinstance(node.ctx, ast.Load):
                parent = ctx.parent(node)
                values.append(parent.value if isinstance(parent, ast.Assign) and node in parent.targets else None)
        return values

    args = getattr(scope.node, "args", None)
    if args is not None and name in {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} | {a.arg for a in (args.vararg, args.kwarg) if a}:
        return None
    values = bound_values(scope)
    if values == [] and not isinstance(scope.node, ast.Module):
        values = bound_values(scopes(ctx)[0])
    return values


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
    binding = _imported_binding(ctx, func)
    return _function_in(ctx.path, *binding) if binding else None


def imported_definition_matches(ctx: FileContext, func: ast.expr, pattern: "re.Pattern[bytes]", classes: bool = False) -> bool:
    """The text of the definition an imported ``func`` names (in a project file; with ``classes``,
    also a class) matches ``pattern``: a cheap test, with no parse, before reading it."""
    binding = _imported_binding(ctx, func)
    if binding is None:
        return False
    module, level, name = binding
    path = _module_file(ctx.path, module, level)
    return bool(path) and _definition_matches(path, name, pattern, classes)


def _imported_binding(ctx: FileContext, func: ast.expr) -> Optional[tuple[Optional[str], int, str]]:
    """(module, level, name) of the definition ``func`` names through an import of this file:
    ``f`` after ``from m import f`` (or ``as f``), ``m.f`` after ``import m``; None otherwise."""
    name = dotted(func)
    if name is None or ctx.path in ("-", "<stdin>"):
        return None
    head, _, rest = name.partition(".")
    for node in statement_index(ctx).imports:
        if isinstance(node, ast.ImportFrom) and not rest:
            for alias in node.names:
                if (alias.asname or alias.name) == head:
                    return node.module, node.level, alias.name
        elif isinstance(node, ast.Import) and rest and "." not in rest:
            for alias in node.names:
                if (alias.asname or alias.name) == head:
                    return alias.name, 0, rest
    return None


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
                    path = _module_file(ctx.path, node.module, node.level)
                    if path and _file_matches(path, STEP_CALL) and _definition_matches(path, alias.name, STEP_CALL):
                        found.add(local)
                else:
                    path = _module_file(ctx.path, alias.name, 0)
                    if path and _file_matches(path, STEP_CALL):
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
    for node in statement_index(ctx).imports:
        for alias in node.names:
            local = alias.asname or alias.name
            if isinstance(node, ast.ImportFrom):
                if (f"{node.module}.{alias.name}" if node.module and not node.level else local) == name:
                    return _definition_in(ctx.path, node.module, node.level, alias.name, ast.ClassDef)
                if node.level and head == local:  # ``from . import models`` ... ``models.Net``
                    return _class_in(_module_file(ctx.path, ".".join(filter(None, [node.module, alias.name])), node.level), attr)
            elif head == alias.name:
                return _class_in(_module_file(ctx.path, alias.name, 0), attr)
    return None


def _class_in(path: Optional[str], name: str) -> Optional[tuple[FileContext, ast.ClassDef]]:
    other = _load(path) if path and name and _may_define(path, name, ast.ClassDef) else None
    if other is not None:
        for cls in other.tree.body:
            if isinstance(cls, ast.ClassDef) and cls.name == name:
                return other, cls
    return None


def _definition_in(importer: str, module: Optional[str], level: int, name: str, kind, depth: int = 0):
    """(context, node) of the top-level ``kind`` definition ``name`` in the module ``importer``
    imports, following re-exports of a package's own modules; None if unknown."""
    path = _module_file(importer, module, level)
    if path is None or not _may_define(path, name, kind):
        return None  # decided from the text: the module is parsed only when it may hold the name
    other = _load(path)
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
    """The file of ``module`` as ``importer`` imports it; None if unknown or outside the
    importer's project (``bound_of``)."""
    folder = os.path.dirname(os.path.abspath(importer))
    found = _module_in_folder(folder, module, level)
    return found if found is not None and _within(found, bound_of(folder)) else None


def _within(path: str, bound: Optional[str]) -> bool:
    """``path`` lies inside the folder ``bound`` (always, when there is no bound)."""
    return bound is None or os.path.abspath(path).startswith(bound.rstrip(os.sep) + os.sep)


def set_root(root: Optional[str]) -> None:
    """The project of the files analysed next (a batch run's repository); None: each file's ``.git``."""
    global _root
    _root = os.path.abspath(root) if root else None


def bound_of(folder: str) -> Optional[str]:
    """The folder imports from ``folder`` may resolve in: the run's project when the folder is in
    it, else the nearest folder above holding ``.git`` (None: no limit)."""
    if _root is not None and (folder == _root or folder.startswith(_root.rstrip(os.sep) + os.sep)):
        return _root  # (the run's project is part of the result cache's key)
    return depends.git_root(folder)


def forget_loaded() -> None:
    """Between two checked files (never during one: callers compare nodes of a loaded file), drop
    the oldest half of the parsed project files once there are more than MAX_LOADED."""
    if len(_loaded) > MAX_LOADED:
        for path in list(_loaded)[: len(_loaded) // 2]:
            del _loaded[path]


@depends.remembered
def _module_in_folder(folder: str, module: Optional[str], level: int) -> Optional[str]:
    """The file ``module`` names for code in ``folder`` (files of one folder share the answer)."""
    parts = module.split(".") if module else []
    if level:
        for _ in range(level - 1):
            folder = os.path.dirname(folder)
        bases = [folder]
    else:
        bases = [folder]  # the importer's folder, then each package level above it
        while _is_file(os.path.join(folder, "__init__.py")):
            folder = os.path.dirname(folder)
            bases.append(folder)
    for base in bases:
        if parts and parts[0] not in _listing(base)[1] and not (len(parts) == 1 and parts[0] + ".py" in _listing(base)[0]):
            depends.probed(os.path.join(base, parts[0]), False)  # (a missing ``x`` also means no ``x.py``)
            if len(parts) == 1:
                depends.probed(os.path.join(base, parts[0] + ".py"), False)
            continue  # neither a module nor a package of that name here: no path to build
        stem = os.path.join(base, *parts)
        package = os.path.join(stem, "__init__.py")
        if not parts:  # ``from . import x``: the package itself
            return package if level and _is_file(package) else None
        for candidate in (stem + ".py", package):
            if _is_file(candidate):
                return candidate
    return None


def _is_file(path: str) -> bool:
    """``os.path.isfile(path)``, answered from its folder's listing: one ``scandir`` a folder
    instead of a ``stat`` for every module an import line might name (``import numpy`` probes
    each package level of a deep tree). Recorded as ``depends.exists`` records a probe."""
    folder, name = os.path.split(path)
    return depends.probed(path, name in _listing(folder)[0])


@functools.lru_cache(maxsize=65536)
def _listing(folder: str) -> tuple[frozenset[str], frozenset[str]]:
    """Names of the regular files and of the folders (or links to one) in ``folder``; empty if
    it cannot be listed. (Not recorded itself: each answer read from it is.)"""
    depends.listing_before(folder)  # the folder's stat first, so a record never postdates the listing
    files, folders = set(), set()
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    if entry.is_file():
                        files.add(entry.name)
                    elif entry.is_dir():
                        folders.add(entry.name)
                except OSError:
                    continue
    except OSError:
        pass
    return frozenset(files), frozenset(folders)


def forget_project_files() -> None:
    """Drop all known of project files (a long-lived process sees them change between analyses)."""
    depends.forget()
    _listing.cache_clear()


# Top-level definitions, each found from its literal start (``\nclass``) at memchr speed.
TOP_CLASS = re.compile(rb"\nclass[ \t]+(\w+)")
TOP_FUNCTIONS = (re.compile(rb"\ndef[ \t]+(\w+)"), re.compile(rb"\nasync[ \t]+def[ \t]+(\w+)"))


def _may_define(path: str, name: str, kind) -> bool:
    """The module's text defines ``name`` at top level as a ``kind`` (``ast.ClassDef``, or the
    function definitions) or imports it: decided from one scan of its bytes, kept as sets of names
    (not the text) per module. A function is never parsed for as a class, nor the reverse."""
    classes, functions, imported = _top_names(path)
    return name in imported or name in (classes if kind is ast.ClassDef else functions)


@depends.remembered
def _top_names(path: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    data = b"\n" + _read(path, MAX_BYTES + 1)
    classes, functions, imported = set(), set(), set()
    if len(data) <= MAX_BYTES + 1:
        classes = {m.group(1).decode("ascii", "replace") for m in TOP_CLASS.finditer(data)}
        functions = {m.group(1).decode("ascii", "replace") for p in TOP_FUNCTIONS for m in p.finditer(data)}
        for match in import_lines(data):
            _, _, grouped, listed, _, _ = match.groups()
            imported.update(w.decode("ascii", "replace") for w in re.findall(rb"\w+", grouped or listed or b""))
    return frozenset(classes), frozenset(functions), frozenset(imported)


class _Loaded(FileContext):
    """A project module's context, kept between the analyses of several files: each memo answer
    keeps the files read while computing it and records them again whenever it is reused."""

    def memo(self, key: object, compute):
        if key not in self.cache:
            with depends.capture() as read:
                value = compute()
            self.cache[key] = (value, read)
        value, read = self.cache[key]
        depends.replay(read)
        return value


def _load(path: str) -> Optional[FileContext]:
    if path not in _loaded:
        loaded = None
        with depends.capture() as read:
            try:
                if os.path.getsize(path) <= MAX_BYTES:
                    source = decode(depends.read(path))
                    loaded = _Loaded(path, source.text, parse(source.text, filename=path), source.newline)
            except (OSError, SourceError, SyntaxError, ValueError, RecursionError):
                pass
            depends.note(path)  # read, too large, or unreadable: what this process saw there
        _loaded[path] = (loaded, read)
    loaded, read = _loaded[path]
    depends.replay(read) if read is not None else depends.note(path)
    return loaded


LONE_CR = re.compile(rb"\r(?!\n)")  # a line end, as \n (the same length: offsets kept)
IMPORT_LINE = re.compile(
    rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]*(?:\(([^)]*)\)|([^\n#]*))|import[ \t]+([\w.]+)(?:[ \t]+as[ \t]+(\w+))?)",
    re.MULTILINE,
)


def import_lines(data: bytes) -> Iterator["re.Match[bytes]"]:
    """``IMPORT_LINE.finditer(data)`` (a lone ``\r`` ends a line, as for Python), found from each
    ``import`` by ``bytes.find``: a regex tried at every line start would cost most of the pre-filter."""
    data = LONE_CR.sub(b"\n", data) if b"\r" in data else data
    start = end = 0
    while (at := data.find(b"import", start)) >= 0:
        start = at + len(b"import")
        line = data.rfind(b"\n", 0, at) + 1
        if line < end:
            continue  # inside the previous match (a parenthesised name list)
        match = IMPORT_LINE.match(data, line)
        if match and match.end() > at:
            end = match.end()
            yield match


def imports_matching(path: str, data: bytes, pattern: "re.Pattern[bytes]") -> bool:
    """True if the file (its bytes ``data``) calls a function or class it imports from a module of
    its own project whose definition's text matches ``pattern`` (``from steps import train_step``
    ... ``train_step(...)``, where ``def train_step`` backpropagates): the byte pre-filter of a file
    whose training step lives in another file. Only modules found beside the file or in its
    package count (never an installed package)."""
    if path in ("-", "<stdin>") or b"import" not in data:
        return False
    folder = os.path.dirname(os.path.abspath(path))
    for match in import_lines(data):
        raw_dots, raw_module, _, _, raw_plain, _ = match.groups()
        package = not raw_plain and raw_dots and not raw_module  # ``from . import steps``: the package's modules
        if not raw_dots and (raw_plain or raw_module or b"").partition(b".")[0] == b"torch":
            continue  # the torch API (as _imports_step_module answers), without the memo's cost
        if not package and not _imports_step_module(folder, raw_dots or b"", raw_plain or raw_module or b"", pattern, _root):
            continue  # cheap, cached per folder and module: most imported modules never backpropagate
        dots, module, grouped, listed, plain, alias = (g.decode("ascii", "replace") if g else "" for g in match.groups())
        target = _module_file(path, plain or module or None, 0 if plain else len(dots))
        if plain:  # ``import steps [as s]`` ... ``s.train_step(...)``
            local = re.escape(alias or plain).encode()
            called = {m.decode() for m in re.findall(rb"\b" + local + rb"\.(\w+)\s*\(", data)}
            if any(_definition_matches(target, name, pattern) for name in called):
                return True
            continue
        for item in (grouped or listed).split(","):
            parts = item.split()
            if not parts or not parts[0].isidentifier():
                continue
            name, local = parts[0], re.escape(parts[-1]).encode()
            if target and not package and _definition_matches(target, name, pattern, classes=True):
                if re.search(rb"\b" + local + (rb"\s*\(" if _definition_kind(target, name, pattern) == b"class" else rb"\s*[(.]"), data):
                    return True  # imported and called (a class: constructed) here
            if package:  # ``steps.train_step(...)`` with ``from . import steps``
                sub = _module_file(path, name, len(dots))
                if sub and _file_matches(sub, pattern):
                    called = {m.decode() for m in re.findall(rb"\b" + local + rb"\.(\w+)\s*\(", data)}
                    if any(_definition_matches(sub, c, pattern) for c in called):
                        return True
    return False


@depends.remembered
def _imports_step_module(folder: str, dots: bytes, module: bytes, pattern: "re.Pattern[bytes]", root: Optional[str]) -> bool:
    """The module an import line of a file in ``folder`` names is a project file whose text
    matches ``pattern`` (never torch's own modules: the torch API, as in graph.py). ``root`` (the
    run's project, read by ``bound_of``) is part of the cache key only."""
    name = module.decode("ascii", "replace")
    if not dots and name.split(".")[0] == "torch":
        return False
    target = _module_in_folder(folder, name or None, len(dots))
    return bool(target) and _within(target, bound_of(folder)) and _file_matches(target, pattern)


DEFINITION = re.compile(rb"^(?:async[ \t]+)?(def|class)[ \t]+(\w+)", re.MULTILINE)
TOP_LEVEL = re.compile(rb"^[^\s#]", re.MULTILINE)


def _definition_matches(path: str, name: str, pattern: "re.Pattern[bytes]", classes: bool = False) -> bool:
    """The text of the top-level function ``def name`` of the module (with ``classes``, or class
    ``class name``: its methods run through the instances a file constructs) matches ``pattern``
    (one scan per module: each definition's answer is kept, not the text)."""
    kind, matches = _definitions(path, pattern).get(name, (b"", False))
    return matches and (kind == b"def" or classes)


def _definition_kind(path: str, name: str, pattern: "re.Pattern[bytes]") -> bytes:
    """``b"def"`` or ``b"class"``: how the module defines ``name`` at top level (empty: not found;
    read from the scan made for ``pattern``)."""
    return _definitions(path, pattern).get(name, (b"", False))[0]


@depends.remembered
def _definitions(path: str, pattern: "re.Pattern[bytes]") -> dict[str, tuple[bytes, bool]]:
    data, found = _read(path), {}
    for match in DEFINITION.finditer(data):
        line_end = data.find(b"\n", match.end())
        end = TOP_LEVEL.search(data, len(data) if line_end < 0 else line_end + 1)
        body = data[match.start() : end.start() if end else len(data)]
        found[match.group(2).decode("ascii", "replace")] = (match.group(1), _matches_in_code(body, pattern))
    return found


def _matches_in_code(body: bytes, pattern: "re.Pattern[bytes]") -> bool:
    """``pattern`` matches ``body`` outside comment lines and triple-quoted strings (docstrings,
    where libraries mention ``loss.backward()`` in prose): judged from text, no parse."""
    for match in pattern.finditer(body):
        line = body.rfind(b"\n", 0, match.start()) + 1
        before = body[: match.start()]
        if not body[line : match.start()].lstrip(b" \t").startswith(b"#") and before.count(b'"""') % 2 == 0 and before.count(b"'''") % 2 == 0:
            return True
    return False


@depends.remembered
def _file_matches(path: str, pattern: "re.Pattern[bytes]") -> bool:
    data = _read(path)
    if pattern is STEP_CALL:
        return b"backward" in data and any(part.search(data) for part in STEP_PARTS)
    return pattern.search(data) is not None


def _read(path: str, limit: int = MAX_BYTES) -> bytes:
    """Up to ``limit`` bytes of a module (empty when it cannot be read), recorded."""
    try:
        return depends.read(path)[:limit]
    except SourceError:
        return b""
