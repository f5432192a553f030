"""What a project file's text says, read as bytes and never parsed: whether it defines a name at
top level, whether a definition's text matches a pattern (a backward pass: ``STEP_CALL``), and the
engine's byte pre-filter of a file whose training step lives in another file it imports
(``imports_matching``). Each answer is kept per process and file (``depends.remembered``)."""

from __future__ import annotations

import ast
import os
import re
from typing import Iterator, Optional

from fixer import depends
from fixer.analysis.project_files import MAX_BYTES, bound_of, module_file, module_in_folder, read_file, run_root, within

MAX_NEIGHBOURS = 400  # files of the neighbouring folders searched by text, at most
TRAINING_SCRIPT = (re.compile(rb"\.zero_grad\s*\("), re.compile(rb"\.step\s*\("))  # with a backward: a script that trains

# a training step frees its graph with a backward pass (``autograd.grad`` stops at its inputs and
# is never one): the text a step function's definition must hold
STEP_ALTERNATIVES = (rb"\.backward\s*\(", rb"autograd\.backward\b", rb"manual_backward")
STEP_CALL = re.compile(b"|".join(STEP_ALTERNATIVES))
STEP_PARTS = tuple(re.compile(part) for part in STEP_ALTERNATIVES)  # each found at memchr speed

# Top-level definitions, each found from its literal start (``\nclass``) at memchr speed.
TOP_CLASS = re.compile(rb"\nclass[ \t]+(\w+)")
TOP_FUNCTIONS = (re.compile(rb"\ndef[ \t]+(\w+)"), re.compile(rb"\nasync[ \t]+def[ \t]+(\w+)"))


def may_define(path: str, name: str, kind, reexported: bool = True) -> bool:
    """The module's text defines ``name`` at top level as a ``kind`` (``ast.ClassDef``, or the
    function definitions) or, with ``reexported``, imports it from a module of its own package
    (``from .models import Net``: the only re-export followed): decided from one scan of its bytes,
    kept as sets of names (not the text) per module. A function is never parsed for as a class, nor
    the reverse, nor a module for a name it imports from elsewhere."""
    classes, functions, imported = _top_names(path)
    return reexported and name in imported or name in (classes if kind is ast.ClassDef else functions)


@depends.remembered
def _top_names(path: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    data = b"\n" + read_file(path, MAX_BYTES + 1)
    classes, functions, imported = set(), set(), set()
    if len(data) <= MAX_BYTES + 1:
        classes = {m.group(1).decode("ascii", "replace") for m in TOP_CLASS.finditer(data)}
        functions = {m.group(1).decode("ascii", "replace") for p in TOP_FUNCTIONS for m in p.finditer(data)}
        for match in import_lines(data):
            dots, _, grouped, listed, _, _ = match.groups()
            if dots:  # (relative imports alone)
                imported.update(w.decode("ascii", "replace") for w in re.findall(rb"\w+", grouped or listed or b""))
    return frozenset(classes), frozenset(functions), frozenset(imported)


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
        if not package and not _imports_step_module(folder, raw_dots or b"", raw_plain or raw_module or b"", pattern, run_root()):
            continue  # cheap, cached per folder and module: most imported modules never backpropagate
        dots, module, grouped, listed, plain, alias = (g.decode("ascii", "replace") if g else "" for g in match.groups())
        target = module_file(path, plain or module or None, 0 if plain else len(dots))
        if plain:  # ``import steps [as s]`` ... ``s.train_step(...)``
            local = re.escape(alias or plain).encode()
            called = {m.group(1).decode() for m in word_matches(local + rb"\.(\w+)\s*\(", data)}
            if any(definition_matches(target, name, pattern) for name in called):
                return True
            continue
        for item in (grouped or listed).split(","):
            parts = item.split()
            if not parts or not parts[0].isidentifier():
                continue
            name, local = parts[0], re.escape(parts[-1]).encode()
            if target and not package and definition_matches(target, name, pattern, classes=True):
                if any(word_matches(local + (rb"\s*\(" if _definition_kind(target, name, pattern) == b"class" else rb"\s*[(.]"), data)):
                    return True  # imported and called (a class: constructed) here
            if package:  # ``steps.train_step(...)`` with ``from . import steps``
                sub = module_file(path, name, len(dots))
                if sub and file_matches(sub, pattern):
                    called = {m.group(1).decode() for m in word_matches(local + rb"\.(\w+)\s*\(", data)}
                    if any(definition_matches(sub, c, pattern) for c in called):
                        return True
    return False


def word_matches(pattern: bytes, data: bytes) -> Iterator["re.Match[bytes]"]:
    """The matches of ``\\b`` + ``pattern`` (which starts with a name) in ``data``: found from the
    name at memchr speed, the word boundary tested after (``re`` tries a leading ``\\b`` at every
    byte). No match is lost: one that fails the test never overlaps one that passes."""
    for match in re.finditer(pattern, data):
        before = data[match.start() - 1 : match.start()]
        if not (before.isalnum() or before == b"_"):
            yield match


@depends.remembered
def _imports_step_module(folder: str, dots: bytes, module: bytes, pattern: "re.Pattern[bytes]", root: Optional[str]) -> bool:
    """The module an import line of a file in ``folder`` names is a project file whose text
    matches ``pattern`` (never torch's own modules: the torch API, as in graph.py). ``root`` (the
    run's project, read by ``bound_of``) is part of the cache key only."""
    name = module.decode("ascii", "replace")
    if not dots and name.split(".")[0] == "torch":
        return False
    target = module_in_folder(folder, name or None, len(dots))
    return bool(target) and within(target, bound_of(folder)) and file_matches(target, pattern)


DEFINITION = re.compile(rb"^(?:async[ \t]+)?(def|class)[ \t]+(\w+)", re.MULTILINE)
TOP_LEVEL = re.compile(rb"^[^\s#]", re.MULTILINE)


def definition_matches(path: str, name: str, pattern: "re.Pattern[bytes]", classes: bool = False) -> bool:
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
    data, found = read_file(path), {}
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
def file_matches(path: str, pattern: "re.Pattern[bytes]") -> bool:
    data = read_file(path)
    if pattern is STEP_CALL:
        return b"backward" in data and any(part.search(data) for part in STEP_PARTS)
    return pattern.search(data) is not None


@depends.remembered
def neighbour_files(here: str) -> tuple[str, ...]:
    """The Python files of the module's folder, of each package folder above it and of the folder
    holding its top package, within the project's bound; at most MAX_NEIGHBOURS."""
    found: list[str] = []
    for folder in _neighbour_folders(here):
        found += _folder_modules(folder)
    return tuple(found[:MAX_NEIGHBOURS])


@depends.remembered
def _neighbour_folders(here: str) -> tuple[str, ...]:
    """The module's folder, each package folder above it and the folder holding its top package,
    within the project's bound, nearest first."""
    folder = os.path.dirname(here)
    bound = bound_of(folder)
    folders = [folder]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parent = os.path.dirname(folder)
        if parent == folder or bound is not None and not (parent + os.sep).startswith(bound.rstrip(os.sep) + os.sep) and parent != bound:
            break
        folder = parent
        folders.append(folder)
    return tuple(folders)


@depends.remembered
def _folder_modules(folder: str) -> tuple[str, ...]:
    """The Python files of one folder (listed once a process: every folder below it asks)."""
    names = depends.python_files(folder)
    depends.modules_listed(folder, names)
    return tuple(os.path.join(folder, n) for n in names)


def imported_by_matching(path: str, pattern: "re.Pattern[bytes]") -> bool:
    """A file around the module (``neighbour_files``) whose code matches ``pattern`` and trains
    (``zero_grad`` and ``step`` calls, outside comments and docstrings) imports it
    (``from helpers import Tracker``, ``from .helpers import Tracker``, ``from . import helpers``,
    ``import helpers``): the byte pre-filter of a module whose classes and functions a training
    script of the project uses (a tracker that keeps graphs has no backward of its own)."""
    if path in ("-", "<stdin>"):
        return False
    here = os.path.abspath(path)
    return here in _imported_by(os.path.join(os.path.dirname(here), "__init__.py"), pattern, run_root())


@depends.remembered
def _imported_by(here: str, pattern: "re.Pattern[bytes]", root: Optional[str]) -> frozenset[str]:
    """The modules the files around ``here`` (``neighbour_files``) that match ``pattern`` import
    (per folder and run): each folder's answer is made once, for every folder below it."""
    found: set[str] = set()
    left = MAX_NEIGHBOURS
    for folder in _neighbour_folders(here):
        files = _folder_modules(folder)
        if len(files) <= left:
            found |= _folder_training_imports(folder, pattern, root)
        else:  # the last folder the bound leaves room for, in part
            for path in files[:left]:
                found |= _training_imports(path, pattern, root)
        left -= min(left, len(files))
        if not left:
            break
    return frozenset(found)


@depends.remembered
def _folder_training_imports(folder: str, pattern: "re.Pattern[bytes]", root: Optional[str]) -> frozenset[str]:
    return frozenset().union(*(_training_imports(path, pattern, root) for path in _folder_modules(folder)))


@depends.remembered
def _training_imports(path: str, pattern: "re.Pattern[bytes]", root: Optional[str]) -> frozenset[str]:
    """The modules one file imports, when its code matches ``pattern`` and trains (per file and run:
    a package's top files are around every folder below it)."""
    data = read_file(path)
    if b"zero_grad" not in data or b"step" not in data:  # (memchr first: most files train nothing)
        return frozenset()
    if not file_matches(path, pattern) or not all(_matches_in_code(data, p) for p in (pattern, *TRAINING_SCRIPT)):
        return frozenset()  # (text alone; in code, not a docstring: a training script, not a library's helper or example)
    found = set()
    for match in import_lines(read_file(path)):
        dots, module, grouped, listed, plain, _ = (g.decode("ascii", "replace") if g else "" for g in match.groups())
        names = [plain] if plain else [module] * bool(module) + [f"{module}.{n}" if module else n for n in re.findall(r"\w+", grouped or listed)]
        found.update(filter(None, (module_file(path, name, 0 if plain else len(dots)) for name in names)))
    return frozenset(os.path.abspath(f) for f in found)
