"""The project's files, as an import of one of them finds them: ``from losses import
compute_loss`` (or ``from .losses import ...``, ``import losses``) resolves to ``losses.py`` beside
the file or in its package, which is parsed once per process. Anything that cannot be found or
parsed is unknown. Every file read or looked for, and every ``.git`` looked for, is reported to
``fixer.depends`` (the result cache's record of what a file's result depends on) on every call:
the per-process memos here are ``depends.remembered``, and a loaded module's context records
again, with each memo answer, the files that answer read."""

from __future__ import annotations

import functools
import os
from typing import Optional

from fixer import depends
from fixer.context import FileContext
from fixer.nodes import parse
from fixer.source import SourceError, decode

MAX_BYTES = 1_000_000
MAX_LOADED = 2048  # parsed project files kept between files: a batch of many repositories stays in bounded memory
_loaded: dict[str, tuple[Optional[FileContext], Optional[dict]]] = depends.kept({})  # path -> (context, the files its loading read)
_root: Optional[str] = None  # the project of the files being analysed (set_root)


def set_root(root: Optional[str]) -> None:
    """The project of the files analysed next (a batch run's repository); None: each file's ``.git``."""
    global _root
    _root = os.path.abspath(root) if root else None


def run_root() -> Optional[str]:
    """The project ``set_root`` gave (None: each file's ``.git`` bounds its imports)."""
    return _root


def bound_of(folder: str) -> Optional[str]:
    """The folder imports from ``folder`` may resolve in: the run's project when the folder is in
    it, else the nearest folder above holding ``.git`` (None: no limit)."""
    if _root is not None and (folder == _root or folder.startswith(_root.rstrip(os.sep) + os.sep)):
        return _root  # (the run's project is part of the result cache's key)
    return depends.git_root(folder)


def module_file(importer: str, module: Optional[str], level: int) -> Optional[str]:
    """The file of ``module`` as ``importer`` imports it; None if unknown or outside the
    importer's project (``bound_of``)."""
    folder = os.path.dirname(os.path.abspath(importer))
    found = module_in_folder(folder, module, level)
    return found if found is not None and within(found, bound_of(folder)) else None


def within(path: str, bound: Optional[str]) -> bool:
    """``path`` lies inside the folder ``bound`` (always, when there is no bound)."""
    return bound is None or os.path.abspath(path).startswith(bound.rstrip(os.sep) + os.sep)


def forget_loaded() -> None:
    """Between two checked files (never during one: callers compare nodes of a loaded file), drop
    the oldest half of the parsed project files once there are more than MAX_LOADED."""
    if len(_loaded) > MAX_LOADED:
        for path in list(_loaded)[: len(_loaded) // 2]:
            loaded, _ = _loaded.pop(path)
            if loaded is not None:
                loaded.cache.clear()  # its answers may refer back to it: freed now, with no cycle collection


@depends.remembered
def module_in_folder(folder: str, module: Optional[str], level: int) -> Optional[str]:
    """The file ``module`` names for code in ``folder`` (files of one folder share the answer)."""
    parts = module.split(".") if module else []
    if level:
        for _ in range(level - 1):
            folder = os.path.dirname(folder)
        bases: tuple[str, ...] = (folder,)
    else:
        bases = _package_levels(folder)
    for base in bases:
        files, folders = _listing(base)
        if parts and parts[0] not in folders and not (len(parts) == 1 and parts[0] + ".py" in files):
            if depends.recording():
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


@depends.remembered
def _package_levels(folder: str) -> tuple[str, ...]:
    """``folder``, then each folder above it while the one below is a package (``__init__.py``):
    where an absolute import from ``folder`` is looked for."""
    bases = [folder]
    while _is_file(os.path.join(folder, "__init__.py")):
        folder = os.path.dirname(folder)
        bases.append(folder)
    return tuple(bases)


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


class _Loaded(FileContext):
    """A project module's context, kept between the analyses of several files: each memo answer
    keeps the files read while computing it and records them again whenever it is reused."""

    def memo(self, key: object, compute):
        return depends.kept_answer(self.cache, key, compute)


def load_file(path: str) -> Optional[FileContext]:
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


def read_file(path: str, limit: int = MAX_BYTES) -> bytes:
    """Up to ``limit`` bytes of a module (empty when it cannot be read), recorded. While nobody
    records, the bytes are kept (``_texts``): the neighbours of a module are searched by text for
    every name asked, each a file read again."""
    data = _texts.get(path) if not depends.recording() else None
    if data is None:
        try:
            data = depends.read(path)
        except SourceError:
            data = b""
        if not depends.recording():
            _texts.keep(path, data)
    return data[:limit]


class _Texts(dict):
    """Files read while nobody records, up to TEXT_BYTES in all: the oldest are dropped first."""

    size = 0

    def keep(self, path: str, data: bytes) -> None:
        if not self:
            self.size = 0  # (emptied by ``depends.forget``)
        self[path] = data
        self.size += len(data)
        while self.size > TEXT_BYTES:
            self.size -= len(self.pop(next(iter(self))))


TEXT_BYTES = 24 * 1024 * 1024
_texts = depends.kept(_Texts())
