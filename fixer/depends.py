"""Which files one analysis read: the result cache's record of what a file's result depends on.

A file's findings depend on its own bytes and on every other project file its analysis looked at
(an imported helper module, a package's ``__init__.py``, a module looked for and not found, the
``.git`` that bounds the project). Code that reads or looks for a project file goes through
``read``, ``note``, ``exists`` (or ``probed``) or ``git_root``; while ``collect()`` is active they report each such
file with the fingerprint of what the analysis saw. A per-process memo of anything computed from
project files is a ``remembered`` function: it keeps the files recorded while computing an answer
and records them again each time it gives that answer, so the second file to use a memo depends on
the same files as the first. A cached result is valid only while every one of them is unchanged.

A file's fingerprint is ``(stat signature or None, digest)``, or ``None`` when it is absent (or
not a regular file, or unreadable): the analysis saw no content there."""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import time
from typing import Any, Callable, Iterable, Iterator, Optional, TypeVar

from fixer.source import SourceError, read_bytes

# (stat signature or None, digest) of a file; None for an absent one; (FOLDER, (mtime, inode) or None, names) of a
# folder where the names (paths below it) were looked for and not found: unchanged while its
# listing is (no entry added, removed or renamed), else while none of the names exists; (BOUND,
# folder or None) under ``<folder>/.git``: the nearest folder holding ``.git`` from there up;
# (MODULES, (mtime, inode) or None, names) under ``<folder>/*.py``: the folder's Python files, for
# an analysis that read every one of them that might import a module (``fixer.analysis.importers``)
Fingerprint = Optional[tuple[Any, Any]]
FOLDER, BOUND, MODULES = "folder", "bound", "modules"
RACY_SECONDS = 2.0  # a file this recently modified may change again within its timestamp's tick
MEMO_LIMIT = 65536  # answers a remembered function keeps (the oldest half goes past it)

_active: Optional[dict[str, Fingerprint]] = None
_seen: dict[str, Fingerprint] = {}  # per process: the content first read (analysis memos keep it)
_folders: dict[str, tuple[str, Optional[tuple[int, int]]]] = {}  # per process: nearest existing folder
_roots: dict[str, Optional[str]] = {}  # per process: folder -> git_root's answer
_memos: list[dict] = []  # every remembered function's answers (``forget`` empties them)
T = TypeVar("T")


def digest(data: bytes) -> str:
    import hashlib  # not needed on a run that only checks stat signatures

    return hashlib.blake2b(data, digest_size=16).hexdigest()


def signature(st: os.stat_result) -> Optional[tuple[int, int, int, int]]:
    """(size, mtime in ns, inode, ctime in ns), or None when the file changed too recently to trust
    it: a second write in the same timestamp tick with the same size would look unchanged (racy
    git). The ctime, which no program can set, catches an edit in place of the same size whose
    mtime was put back (``os.utime``, ``touch -r``, an archive restore)."""
    if time.time() - st.st_mtime < RACY_SECONDS:
        return None
    return stat_tuple(st)


def stat_tuple(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def read(path: str) -> bytes:
    """The bytes of ``path`` (``fixer.source.read_bytes``), recorded as a dependency. The stat
    comes first, so a signature never describes content newer than the bytes analysed."""
    if _active is None:  # nobody is recording (no cache): no stat, no digest
        return read_bytes(path)
    try:
        st: Optional[os.stat_result] = os.stat(path)
    except OSError:
        st = None
    try:
        data = read_bytes(path)
    except SourceError:
        _active[path] = None
        raise
    _seen[path] = (signature(st) if st else None, digest(data))
    _active[path] = _seen[path]
    return data


def recording() -> bool:
    """Whether an analysis's dependencies are being recorded (a record need be built only then)."""
    return _active is not None


def note(path: str) -> None:
    """Record ``path`` as a dependency of the current analysis, as this process first saw it."""
    if _active is None:
        return
    if path not in _seen:
        _seen[path] = fingerprint(path)
    _active[path] = _seen[path]


def exists(path: str) -> bool:
    """``os.path.isfile``, recorded: a module found (its content), or looked for and not found."""
    if _active is None:
        return os.path.isfile(path)
    listing_before(os.path.dirname(path))
    return probed(path, os.path.isfile(path))


def listing_before(folder: str) -> None:
    """Stat ``folder`` (or its nearest existing parent) before it is listed or probed, so that
    the listing recorded for a name missing there never describes a later state of it."""
    _nearest_folder(folder)


def probed(path: str, found: bool) -> bool:
    """Record the answer of a probe made elsewhere (a folder's listing): ``path`` is a file (its
    content), or it is missing (the nearest existing folder's listing and the missing name)."""
    if _active is not None:
        if found:
            note(path)
        else:
            merge(_active, _absence(path))
    return found


def modules_listed(folder: str, names: "Iterable[str]") -> None:
    """Record that the analysis looked at the Python files of ``folder`` (``names``): unchanged
    while none is added, removed or renamed."""
    if _active is not None:
        _active[os.path.join(folder, "*.py")] = (MODULES, _trusted_listing(folder), tuple(sorted(names)))


def python_files(folder: str) -> list[str]:
    """The names of the regular ``.py`` files in ``folder`` (empty if it cannot be listed)."""
    try:
        with os.scandir(folder) as entries:
            return sorted(e.name for e in entries if e.name.endswith(".py") and e.is_file())
    except OSError:
        return []


def _trusted_listing(folder: str) -> Optional[tuple[int, int]]:
    """The folder's (mtime, inode), or None when it changed too recently to trust it."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_ino) if time.time() - st.st_mtime >= RACY_SECONDS else None


def _same_modules(pattern: str, recorded: tuple) -> tuple[bool, Fingerprint]:
    folder = os.path.dirname(pattern)
    _, listing, names = recorded
    try:
        st = os.stat(folder)
        now = (st.st_mtime_ns, st.st_ino)
    except OSError:
        now = None
    if listing is not None and now == tuple(listing):
        return True, recorded
    found = tuple(python_files(folder))
    return found == tuple(names), (MODULES, _trusted_listing(folder), found)


def git_root(folder: str) -> Optional[str]:
    """The nearest folder from ``folder`` up holding ``.git`` (a folder, or a worktree's file),
    recorded as that answer: unchanged while the same walk finds the same folder."""
    found = _git_root(folder)
    if _active is not None:
        _active[os.path.join(folder, ".git")] = (BOUND, found)
    return found


def _git_root(folder: str) -> Optional[str]:
    start, walked = folder, []
    while folder not in _roots:
        walked.append(folder)
        if os.path.lexists(os.path.join(folder, ".git")):
            _roots[folder] = folder
            break
        parent = os.path.dirname(folder)
        if parent == folder:
            _roots[folder] = None
            break
        folder = parent
    for each in walked:
        _roots[each] = _roots[folder]
    return _roots[start]


def _absence(path: str) -> dict[str, Fingerprint]:
    """The record of ``path`` not found: its nearest existing folder's listing (stat'ed before
    the probe; None when it changed too recently to trust) and the first name below that folder
    on the way to ``path`` (no such entry: nothing below it either)."""
    folder, listing = _nearest_folder(os.path.dirname(path))
    name = os.path.relpath(path, folder).split(os.sep, 1)[0]  # below the nearest folder: missing
    return {folder: (FOLDER, listing, (name,))}


def merge(target: dict[str, Fingerprint], records: dict[str, Fingerprint]) -> None:
    """Add ``records`` to ``target``; two records of names missing in one folder keep both's names."""
    for path, recorded in records.items():
        old = target.get(path)
        if old is not None and recorded is not None and old[0] == FOLDER == recorded[0] and old[2] != recorded[2]:
            recorded = (FOLDER, recorded[1], tuple(sorted(set(old[2]) | set(recorded[2]))))
        target[path] = recorded


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


@contextlib.contextmanager
def collect() -> Iterator[dict[str, Fingerprint]]:
    """Record the dependencies of the analysis run inside the block: {path: fingerprint}."""
    global _active
    outer, _active = _active, {}
    try:
        yield _active
    finally:
        _active = outer


@contextlib.contextmanager
def capture() -> Iterator[Optional[dict[str, Fingerprint]]]:
    """What is recorded inside the block, also recorded in the enclosing collection (None when
    nobody is recording): for a memo to keep with its answer and ``replay`` when it reuses it."""
    global _active
    outer = _active
    if outer is None:
        yield None
        return
    _active = {}
    try:
        yield _active
    finally:
        inner, _active = _active, outer
        merge(outer, inner)


def replay(recorded: Optional[dict[str, Fingerprint]]) -> None:
    if _active is not None and recorded:
        merge(_active, recorded)


def kept_answer(answers: dict, key: object, compute: Callable[[], T]) -> T:
    """``answers[key]``, computed once: the answer keeps the files recorded while computing it and
    records them again whenever it is reused (a memo kept across the analyses of several files)."""
    if key not in answers:
        with capture() as read:
            answers[key] = (compute(), read)
    value, read = answers[key]
    replay(read)
    return value


def remembered(function: Callable[..., T]) -> Callable[..., T]:
    """A memo of ``function`` (hashable arguments) for answers computed from project files: each
    answer keeps the files recorded while computing it, recorded again on every later call."""
    memo: dict[tuple, tuple[Any, Optional[dict[str, Fingerprint]]]] = {}
    _memos.append(memo)

    @functools.wraps(function)
    def wrapper(*args):
        key = (args, _active is not None)  # an answer computed while nobody recorded has no record
        hit = memo.get(key)
        if hit is None:
            if key[1]:
                with capture() as recorded:
                    hit = (function(*args), recorded)
            else:  # nobody records: no record to capture
                hit = (function(*args), None)
            if len(memo) >= MEMO_LIMIT:
                for old in list(memo)[: MEMO_LIMIT // 2]:
                    del memo[old]
            memo[key] = hit
        elif hit[1]:
            merge(_active, hit[1])
        return hit[0]

    return wrapper


def kept(memo: dict) -> dict:
    """A per-process memo of project files that ``forget`` empties too."""
    _memos.append(memo)
    return memo


def forget() -> None:
    """Drop every per-process memo of project files (a long-lived process, after files changed)."""
    for memo in _memos:
        memo.clear()
    _seen.clear()
    _folders.clear()
    _roots.clear()


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
    listing: its mtime and inode; an entry: that the path exists."""
    if recorded is not None and recorded[0] == FOLDER:
        return _still_missing(path, recorded)
    if recorded is not None and recorded[0] == BOUND:
        return _git_root(os.path.dirname(path)) == recorded[1], recorded
    if recorded is not None and recorded[0] == MODULES:
        return _same_modules(path, recorded)
    try:
        st = os.stat(path)
    except OSError:
        return recorded is None, recorded
    if recorded is None:
        return _unreadable(path, st), recorded
    sig, known = recorded
    if sig is not None and sig == stat_tuple(st):
        return True, recorded
    now = fingerprint(path)
    return (now is not None and now[1] == known), now


def _still_missing(folder: str, recorded: tuple) -> tuple[bool, Fingerprint]:
    """The folder's listing is as recorded, or else none of the names exists (then its listing now
    is the one to keep)."""
    _, listing, names = recorded
    try:
        st = os.stat(folder)
        now = (st.st_mtime_ns, st.st_ino) if stat.S_ISDIR(st.st_mode) else None
    except OSError:
        now = None
    if listing is not None and now == tuple(listing):
        return True, recorded
    if any(os.path.lexists(os.path.join(folder, name)) for name in names):
        return False, recorded
    trusted = now if now is not None and time.time() - st.st_mtime >= RACY_SECONDS else None
    return True, (FOLDER, trusted, tuple(names))


def _unreadable(path: str, st: os.stat_result) -> bool:
    """A file recorded as absent is unchanged if it still cannot be read as a regular file."""
    return not stat.S_ISREG(st.st_mode) or fingerprint(path) is None
