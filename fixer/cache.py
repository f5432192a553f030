"""The result cache, as ruff's: ``.graphfix_cache/`` at the project root (the folder of the
pyproject.toml that configures graphfix, else the current folder), or ``--cache-dir`` /
``GRAPHFIX_CACHE_DIR`` / ``cache-dir``. It holds a ``.gitignore`` (``*``), a ``CACHEDIR.TAG`` and
one index file per graphfix version and settings: ``<version>/<key>.json``.

The key covers everything that changes a file's result apart from the files themselves: graphfix's
version and the size and time of each of its own source files (a changed rule is a new key), the
Python version (the parser), the rules selected and ignored as given, and ``max-file-size``. An
entry, under the file's absolute path, holds the fingerprint of every file its analysis read
(``fixer.depends``: the file itself, imported project modules, modules looked for and not found)
and the result; it is used only while all of them are unchanged.

A run reads the index once and, if it analysed anything, writes it once: re-read, merged with
this run's entries and renamed over the old one, so concurrent runs never see a half-written
index (the last writer wins; a lost entry is only a later miss). Anything unexpected in the cache
(a corrupt index, a read-only folder) turns caching off for the run; it never fails the run."""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Optional

from fixer import __version__, depends

FOLDER = ".graphfix_cache"
FORMAT = 2
TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by graphfix.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
_PACKAGES = ("fixer", "fixer/analysis", "codemods")  # graphfix's own code: a change is a new key


def cache_folder(flag: Optional[str], configured: Optional[str], project_root: str) -> str:
    chosen = flag or os.environ.get("GRAPHFIX_CACHE_DIR") or configured
    return os.path.abspath(chosen) if chosen else os.path.join(os.path.abspath(project_root), FOLDER)


def settings_key(selected: list[str], ignored: list[str], max_file_size: int) -> str:
    import codemods

    base = os.path.dirname(os.path.dirname(os.path.abspath(codemods.__file__)))
    code = []
    for package in _PACKAGES:
        try:
            with os.scandir(os.path.join(base, package)) as entries:
                code += sorted((package, e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in entries if e.name.endswith(".py"))
        except OSError:
            pass
    parts = [__version__, sys.implementation.name, list(sys.version_info[:2]), selected, ignored, max_file_size, code]
    return depends.digest(json.dumps(parts).encode())


class Cache:
    """One run's view of one index file."""

    def __init__(self, folder: str, key: str, fixing: bool = False, unsafe: bool = False) -> None:
        self.folder = folder
        self.path = os.path.join(folder, __version__, f"{key}.json")
        self.fixing, self.unsafe = fixing, unsafe
        self.entries: dict[str, Any] = self._read()
        self.known = bool(self.entries)  # these settings were used before (so they are valid)
        self.updates: dict[str, Any] = {}
        self._checked: dict[tuple[str, Any], tuple[bool, Any]] = {}  # this run: (path, recorded) -> unchanged
        self.failed: Optional[str] = None  # why the index could not be written

    def prepare(self) -> bool:
        """Make the folder. The runner calls this before analysing: a new folder in the project
        changes the project folder's listing, which analyses that looked for a module record."""
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            _mark(self.folder)
            return True
        except OSError as exc:
            self.failed = exc.strerror or str(exc)
            return False

    def _read(self) -> dict[str, Any]:
        try:
            with open(self.path, "rb") as handle:
                document = json.loads(handle.read())
            entries = document["entries"] if document.get("format") == FORMAT else {}
            return entries if isinstance(entries, dict) else {}
        except (OSError, ValueError, AttributeError, TypeError, KeyError):  # absent or corrupt: start again
            return {}

    def lookup(self, path: str):
        """The cached FileResult of ``path``, or None (a miss)."""
        from fixer import cache_codec

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
        if entry[0].get(path) is None:  # an entry always records its own file's content
            return False
        refreshed = {}
        for dep, recorded in entry[0].items():
            key = (dep, _hashable(recorded))
            if key not in self._checked:
                self._checked[key] = depends.unchanged(dep, key[1])
            same, now = self._checked[key]
            if not same:
                return False
            if now != key[1]:  # same content, new stat signature: trust the signature next time
                refreshed[dep] = now
        if refreshed:
            self.updates[path] = [{**entry[0], **refreshed}, entry[1]]
        return True

    def store(self, result, found: dict[str, depends.Fingerprint]) -> None:
        """Keep ``result`` with the fingerprints of the files its analysis read (``found``)."""
        from fixer import cache_codec

        deps = {os.path.abspath(p): fp for p, fp in found.items()}
        path = os.path.abspath(result.path)
        if cache_codec.cacheable(result) and deps.get(path) is not None:  # its own content, read
            self.updates[path] = [deps, cache_codec.encode(result)]

    def save(self) -> None:
        """Write this run's entries, merged into the index as it is now on disk."""
        if not self.updates:
            return
        from fixer import temp_files

        if not self.prepare():
            return
        try:
            merged = {path: entry for path, entry in self._read().items() if os.path.exists(path)}  # deleted files go
            merged.update(self.updates)
            data = json.dumps({"format": FORMAT, "entries": merged}, separators=(",", ":")).encode()
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


def _hashable(recorded: Any) -> depends.Fingerprint:
    """A fingerprint as ``fixer.depends`` makes it, from its JSON form (lists for tuples)."""
    if recorded is None:
        return None
    kind, value = recorded
    return (kind, tuple(value)) if kind == depends.FOLDER else (tuple(kind) if kind else None, value)


def _mark(folder: str) -> None:
    """The cache folder's ``.gitignore`` and ``CACHEDIR.TAG`` (backup tools skip tagged folders)."""
    for name, text in ((".gitignore", "# Automatically created by graphfix.\n*\n"), ("CACHEDIR.TAG", TAG)):
        target = os.path.join(folder, name)
        if not os.path.exists(target):
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(text)


def clean(folder: str) -> bool:
    """Remove a cache folder; only one graphfix tagged (so ``--cache-dir ~`` cannot remove a home)."""
    import shutil

    tag = os.path.join(folder, "CACHEDIR.TAG")
    try:
        with open(tag, encoding="utf-8") as handle:
            if not handle.read().startswith(TAG.splitlines()[0]):
                return False
    except OSError:
        return False
    shutil.rmtree(folder)
    return True
