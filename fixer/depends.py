"""Which files one analysis read: the result cache's record of what a file's result depends on.

A file's findings depend on its own bytes and on every other project file its analysis looked at
(an imported helper module, a package's ``__init__.py``, a module that was looked for and not
found). Code that reads or looks for a project file goes through ``read``, ``note`` or
``exists``; while ``collect()`` is active they report each such file with the fingerprint of the
content the analysis used. A cached result is valid only while every one of them is unchanged.

A file's fingerprint is ``(stat signature or None, digest)``, or ``None`` when it is absent (or
not a regular file, or unreadable): the analysis saw no content there."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from typing import Any, Iterator, Optional

from fixer.source import SourceError, read_bytes

# (stat signature or None, digest) of a file; None for an absent one; (FOLDER, (mtime, inode)) of
# a folder whose listing is unchanged as long as no entry is added, removed or renamed
Fingerprint = Optional[tuple[Any, Any]]
FOLDER = "folder"
RACY_SECONDS = 2.0  # a file this recently modified may change again within its timestamp's tick

_active: Optional[dict[str, Fingerprint]] = None
_seen: dict[str, Fingerprint] = {}  # per process: the content first read (analysis memos keep it)
_folders: dict[str, tuple[str, Optional[tuple[int, int]]]] = {}  # per process: nearest existing folder


def digest(data: bytes) -> str:
    import hashlib  # not needed on a run that only checks stat signatures

    return hashlib.blake2b(data, digest_size=16).hexdigest()


def signature(st: os.stat_result) -> Optional[tuple[int, int, int]]:
    """(size, mtime in ns, inode), or None when the file changed too recently to trust it: a
    second write in the same timestamp tick with the same size would look unchanged (racy git)."""
    if time.time() - st.st_mtime < RACY_SECONDS:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def read(path: str) -> bytes:
    """The bytes of ``path`` (``fixer.source.read_bytes``), recorded as a dependency. The stat
    comes first, so a signature never describes content newer than the bytes analysed."""
    if _active is None:  # nobody is recording (no cache): no stat, no digest
        return read_bytes(path)
    try:
        st: Optional[os.stat_result] = os.stat(path)
    except OSError:
        st = None
    data = read_bytes(path)
    _seen[path] = (signature(st) if st else None, digest(data))
    note(path)
    return data


def note(path: str) -> None:
    """Record ``path`` as a dependency of the current analysis, as this process first saw it."""
    if _active is None:
        return
    if path not in _seen:
        _seen[path] = fingerprint(path)
    _active[path] = _seen[path]


def exists(path: str) -> bool:
    """``os.path.isfile``, recorded: a module found (its content), or looked for and not found.
    Absence is recorded as the listing of the nearest folder that exists (its mtime changes when
    an entry is added), stat'ed before the probe: one record for every name missing there."""
    if _active is None:
        return os.path.isfile(path)
    folder, listing = _nearest_folder(os.path.dirname(path))
    found = os.path.isfile(path)
    if found:
        note(path)
    else:
        if listing is None:  # a folder changed too recently to trust: the name itself
            _active[path] = None
        else:
            _active[folder] = (FOLDER, listing)
    return found


def _nearest_folder(folder: str) -> tuple[str, Optional[tuple[int, int]]]:
    if folder not in _folders:
        try:
            st = os.stat(folder)
            listing = None if time.time() - st.st_mtime < RACY_SECONDS else (st.st_mtime_ns, st.st_ino)
            _folders[folder] = (folder, listing) if stat.S_ISDIR(st.st_mode) else (folder, None)
        except OSError:
            parent = os.path.dirname(folder)
            _folders[folder] = _nearest_folder(parent) if parent != folder else (folder, None)
    return _folders[folder]


def fingerprint(path: str) -> Fingerprint:
    """The current fingerprint of ``path``, read from disk."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        return (signature(st), digest(read_bytes(path)))
    except (OSError, SourceError):
        return None


def unchanged(path: str, recorded: Fingerprint) -> tuple[bool, Fingerprint]:
    """(whether ``path`` still holds what ``recorded`` describes, the fingerprint to keep). The
    stat signature alone decides when it was recorded and matches; else the content's digest,
    and when that matches, the fingerprint to keep carries the current signature. A folder's
    listing: its mtime and inode."""
    try:
        st = os.stat(path)
    except OSError:
        return recorded is None, recorded
    if recorded is None:
        return _unreadable(path, st), recorded
    if recorded[0] == FOLDER:
        return stat.S_ISDIR(st.st_mode) and (st.st_mtime_ns, st.st_ino) == tuple(recorded[1]), recorded
    sig, known = recorded
    if sig is not None and sig == (st.st_size, st.st_mtime_ns, st.st_ino):
        return True, recorded
    now = fingerprint(path)
    return (now is not None and now[1] == known), now


def _unreadable(path: str, st: os.stat_result) -> bool:
    """A file recorded as absent is unchanged if it still cannot be read as a regular file."""
    return not stat.S_ISREG(st.st_mode) or fingerprint(path) is None


@contextlib.contextmanager
def collect() -> Iterator[dict[str, Fingerprint]]:
    """Record the dependencies of the analysis run inside the block: {path: fingerprint}."""
    global _active
    outer, _active = _active, {}
    try:
        yield _active
    finally:
        _active = outer
