"""The result cache, as ruff's: ``.graphfix_cache/`` at the project root (the folder of the
pyproject.toml that configures graphfix, else the current folder), or ``--cache-dir`` /
``GRAPHFIX_CACHE_DIR`` / ``cache-dir``. It holds a ``.gitignore`` (``*``), a ``CACHEDIR.TAG`` and
one index file per graphfix version and settings: ``<version>/<key>.json``.

The key covers everything that changes a file's result apart from the files themselves: graphfix's
version and the size and time of each of its own source files (a changed rule is a new key), the
Python version (the parser), and the engine settings the file is checked with: the rules that run
on it (select and ignore of the command line or its config, its per-file-ignores),
``max-file-size``, and the project its imports resolve in (a batch's repository). An entry, under
the file's absolute path, holds the fingerprint of every file its analysis read or looked for
(``fixer.depends``: the file itself, imported project modules and the text tests of the byte
pre-filter, modules looked for and not found, the ``.git`` folders that bound the project) and
the result; it is used only while all of them are unchanged.

A run reads the index once and, if it analysed anything, writes it once: re-read, merged with
this run's entries and renamed over the old one, so concurrent runs never see a half-written
index (the last writer wins; a lost entry is only a later miss). Anything unexpected in the cache
(a corrupt index, a read-only folder) turns caching off for the run; it never fails the run."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable, Optional

from fixer import __version__, cache_codec, cache_folder, depends, temp_files

FORMAT = 3
_PACKAGES = ("fixer", "fixer/analysis", "codemods")  # graphfix's own code: a change is a new key


def open_run_cache(folder: str, warn: Callable[[str], None]) -> "Optional[RunCache]":
    """The run's result cache in ``folder``, or None (with a warning) if it cannot be used: the
    cache never fails a run. A folder graphfix may not use raises cache_folder.LocationError."""
    try:
        return RunCache(folder)
    except cache_folder.LocationError:
        raise
    except Exception as exc:
        warn(f"graphfix: warning: result cache not used: {type(exc).__name__}: {exc}")
        return None


def code_key() -> list:
    """graphfix's version and the size and time of each of its own source files, the Python."""
    import codemods  # where the rules are found now (a test swaps the package)

    base = os.path.dirname(os.path.dirname(os.path.abspath(codemods.__file__)))
    code = []
    for package in _PACKAGES:
        try:
            with os.scandir(os.path.join(base, package)) as entries:
                code += sorted((package, e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in entries if e.name.endswith(".py"))
        except OSError:
            pass
    return [__version__, sys.implementation.name, list(sys.version_info[:2]), code]


def settings_key(code: list, rules: list[str], max_file_size: int, root: Optional[str]) -> str:
    """The index of the files checked with these engine settings: the rules that run on them
    (after select, ignore and per-file-ignores of their config), ``max-file-size``, and the
    project imports resolve in (a batch's repository; None: the nearest ``.git``, recorded)."""
    return f"{_code_part(code)}-{depends.digest(json.dumps([code, rules, max_file_size, root]).encode())}"


def _code_part(code: list) -> str:
    """The start of an index's name: the graphfix code it was written by (its stale siblings go)."""
    return depends.digest(json.dumps(code).encode())[:16]


class RunCache:
    """A run's result cache: one index per engine settings its files are checked with (per-file
    config and the repositories of a batch give several), all in one folder."""

    def __init__(self, folder: str) -> None:
        cache_folder.check_usable(folder)  # never read an index from a folder graphfix does not own
        self.folder = folder
        self._code = code_key()
        self._indexes: dict[tuple, Cache] = {}

    def index(self, options) -> "Cache":
        """The index of files checked with ``options`` (fixing and unsafe decide what a hit is)."""
        key = (options.rules, options.max_file_size, options.root, options.fix, options.unsafe)
        if key not in self._indexes:
            rules = [rule.code for rule in options.rules]
            name = settings_key(self._code, rules, options.max_file_size, options.root)
            self._indexes[key] = Cache(self.folder, name, options.fix, options.unsafe)
        return self._indexes[key]

    def lookup(self, path: str, options):
        return self.index(options).lookup(path)

    def store(self, result, options, found: dict[str, depends.Fingerprint]) -> None:
        self.index(options).store(result, found)

    def prepare(self) -> None:
        if self._indexes:
            next(iter(self._indexes.values())).prepare()

    def save(self) -> None:
        for index in self._indexes.values():  # indexes sharing a file merge on disk, one after the other
            index.save()

    @property
    def failed(self) -> Optional[str]:
        return next((index.failed for index in self._indexes.values() if index.failed), None)


class Cache:
    """One run's view of one index file: ``{"format", "deps": [[path, fingerprint], ...],
    "entries": {path: [[index into deps, ...], result]}}`` (a file many entries depend on, such
    as a package's ``__init__.py``, is written and checked once)."""

    def __init__(self, folder: str, key: str, fixing: bool = False, unsafe: bool = False) -> None:
        self.folder = folder
        self.path = os.path.join(folder, __version__, f"{key}.json")
        self.fixing, self.unsafe = fixing, unsafe
        self.deps, self.entries = self._read()
        self.updates: dict[str, list] = {}  # path -> [{dep: fingerprint}, result]
        self._checked: dict[int, tuple[bool, Any]] = {}  # this run: index into deps -> (unchanged, fingerprint now)
        self.failed: Optional[str] = None  # why the index could not be written

    def prepare(self) -> bool:
        """Make the folder (``cache_folder.claim``). The runner calls this before analysing: a new
        folder in the project changes the project folder's listing, which analyses that looked
        for a module record."""
        try:
            cache_folder.claim(self.folder)
            cache_folder.version_folder(self.folder, __version__)
            return True
        except cache_folder.LocationError as exc:
            self.failed = str(exc)
        except OSError as exc:
            self.failed = exc.strerror or str(exc)
        return False

    def _read(self) -> tuple[list, dict[str, Any]]:
        try:
            with open(self.path, "rb") as handle:
                document = json.loads(handle.read())
            if document.get("format") == FORMAT and isinstance(document["deps"], list) and isinstance(document["entries"], dict):
                return document["deps"], document["entries"]
        except (OSError, ValueError, AttributeError, TypeError, KeyError, RecursionError, MemoryError):  # absent or corrupt
            pass
        return [], {}

    def lookup(self, path: str):
        """The cached FileResult of ``path``, or None (a miss)."""
        key = os.path.abspath(path)
        entry = self.entries.get(key)
        try:
            if entry is None or not self._valid(key, entry):
                return None
            result = cache_codec.decode(path, entry[1])
        except Exception:  # an entry this code did not write: a miss, never a failed run
            return None
        return None if self.fixing and cache_codec.would_fix(result, self.unsafe) else result

    def _valid(self, path: str, entry: list) -> bool:
        own, refreshed = False, False
        for index in entry[0]:
            if index not in self._checked:
                dep, recorded = self.deps[index]
                recorded = _hashable(recorded)
                same, now = depends.unchanged(dep, recorded)
                self._checked[index] = (same, None if now == recorded else now)
            same, now = self._checked[index]
            if not same:
                return False
            own = own or (self.deps[index][0] == path and self.deps[index][1] is not None)
            refreshed = refreshed or now is not None
        if refreshed:  # same content, new stat signature: trust the signature next time
            deps = {}
            for index in entry[0]:
                dep, recorded = self.deps[index]
                deps[dep] = self._checked[index][1] or _hashable(recorded)
            self.updates[path] = [deps, entry[1]]
        return own  # an entry always records its own file's content

    def store(self, result, found: dict[str, depends.Fingerprint]) -> None:
        """Keep ``result`` with the fingerprints of the files its analysis read (``found``)."""
        deps = {os.path.abspath(p): fp for p, fp in found.items()}
        path = os.path.abspath(result.path)
        if cache_codec.cacheable(result) and deps.get(path) is not None:  # its own content, read
            self.updates[path] = [deps, cache_codec.encode(result)]

    def save(self) -> None:
        """Write this run's entries, merged into the index as it is now on disk."""
        if not self.updates:
            return
        if not self.prepare():
            return
        table: list = []
        numbers: dict[tuple, int] = {}

        def number(dep: str, recorded: Any) -> int:
            key = (dep, _hashable(recorded))
            if key not in numbers:
                numbers[key] = len(table)
                table.append([dep, recorded])
            return numbers[key]

        try:
            old_deps, old_entries = self._read()
            merged = {}
            for path, entry in old_entries.items():
                if path not in self.updates and os.path.exists(path):  # deleted files go
                    try:
                        merged[path] = [[number(*old_deps[i]) for i in entry[0]], entry[1]]
                    except (IndexError, KeyError, TypeError, ValueError):  # an entry this code did not write
                        continue
            for path, (deps, result) in self.updates.items():
                merged[path] = [[number(dep, recorded) for dep, recorded in deps.items()], result]
            data = json.dumps({"format": FORMAT, "deps": table, "entries": merged}, separators=(",", ":")).encode()
            fd, temp = temp_files.create(os.path.dirname(self.path))
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(temp, self.path)
            except OSError:
                os.unlink(temp)
                raise
        except OSError as exc:
            self.failed = exc.strerror or str(exc)
        _prune(os.path.dirname(self.path), os.path.basename(self.path).split("-")[0])


STALE_SECONDS = 24 * 3600  # another graphfix sharing the folder (pre-commit's and a venv's) keeps its index


def _prune(folder: str, code: str) -> None:
    """Remove the indexes other graphfix code wrote (an upgrade, an edited checkout) that no run
    has written for a day: each code change left one more index behind, forever."""
    limit = time.time() - STALE_SECONDS
    try:
        with os.scandir(folder) as entries:
            stale = [e.path for e in entries if (m := cache_folder.INDEX_FILE.match(e.name)) and m.group(1) != code
                     and e.is_file(follow_symlinks=False) and e.stat(follow_symlinks=False).st_mtime < limit]
        for path in stale:
            os.unlink(path)
    except OSError:
        pass  # another run pruned it first, or the folder is read-only: a later run tries again


def _hashable(recorded: Any) -> depends.Fingerprint:
    """A fingerprint as ``fixer.depends`` makes it, from its JSON form (lists for tuples)."""
    if recorded is None:
        return None
    kind = recorded[0]
    if kind == depends.BOUND:
        return (kind, recorded[1])
    if kind in (depends.FOLDER, depends.MODULES):
        return (kind, tuple(recorded[1]) if recorded[1] else None, tuple(recorded[2]))
    return (tuple(kind) if kind else None, recorded[1])
