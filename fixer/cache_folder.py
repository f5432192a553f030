"""Where the result cache may live, and what graphfix may write and remove there.

graphfix owns a cache folder only when it created it, or found it empty, and marked it with its
``CACHEDIR.TAG`` (a regular file, not a link); a folder that holds anything else is never adopted.
A folder at or above the home folder, the filesystem root, or the project's root is refused
wherever it was chosen; a ``cache-dir`` of a repository's config must lie inside that repository
(its folder, links resolved): a checked repository cannot make graphfix write, or ``clean``
remove, anything outside it. ``--cache-dir`` and ``GRAPHFIX_CACHE_DIR`` are the user's own choice.

``clean`` removes only what graphfix writes there: the index files of its version folders (and
their temporary files), the version folders once empty, its tag and its ``.gitignore``, and the
folder itself only when nothing else is left in it. Nothing is removed recursively."""

from __future__ import annotations

import contextlib
import os
import re
import stat
from typing import Optional, Sequence

from fixer import temp_files

FOLDER = ".graphfix_cache"
TAG_NAME, IGNORE_NAME = "CACHEDIR.TAG", ".gitignore"
TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by graphfix.\n"
    "# For information about cache directory tags, see https://bford.info/cachedir/\n"
)
IGNORE = "# Automatically created by graphfix.\n*\n"
MARKERS = ((IGNORE_NAME, IGNORE), (TAG_NAME, TAG))  # what claiming a folder writes, in order
VERSION_FOLDER = re.compile(r"\d[\w.+-]*\Z")  # 0.1.0, 1.2.0rc1, 0.1.0+local
# an index: ``<code>-<settings>.json`` (digests of graphfix's code and of the settings), or the older ``<settings>.json``
INDEX_FILE = re.compile(r"(?:([0-9a-f]{16})-)?[0-9a-f]{32}\.json\Z")


class LocationError(Exception):
    """The cache folder chosen may not be used (said in words)."""


def choose(flag: Optional[str], configured: Optional[str], config: Optional[str], cwd: str, paths: Sequence[str] = ()) -> Optional[str]:
    """The cache folder, links resolved: ``--cache-dir``, else ``GRAPHFIX_CACHE_DIR``, else the
    config's ``cache-dir`` (relative to the config's folder, and inside it), else ``.graphfix_cache``
    at the project root (the config's folder, else ``cwd``), but None (no cache) when one of the
    ``paths`` checked lies outside that root: a run never writes outside the paths given unless
    told where. Raises LocationError."""
    root = os.path.dirname(os.path.abspath(config)) if config else os.path.abspath(cwd)
    explicit = flag or os.environ.get("GRAPHFIX_CACHE_DIR")
    if explicit:
        folder = os.path.realpath(os.path.join(cwd, os.path.expanduser(explicit)))
    elif not configured and any(not _at_or_below(os.path.realpath(os.path.join(cwd, p)), os.path.realpath(root)) for p in paths):
        return None
    else:
        folder = os.path.realpath(os.path.join(root, configured or FOLDER))
        if not _strictly_below(folder, os.path.realpath(root)):
            where = f"cache-dir = {configured!r} of {config}" if configured else f"{FOLDER} of {root}"
            raise LocationError(f"{where} resolves to {folder}, outside the project {root}; "
                                "a repository's config may not place the cache outside it (use --cache-dir to choose)")
    refuse_location(folder, root)
    return folder


def refuse_location(folder: str, project_root: str) -> None:
    """Raise LocationError for a folder graphfix must never use as its cache (``folder`` real)."""
    home = os.path.realpath(os.path.expanduser("~"))
    for other, what in ((home, "the home folder"), (os.path.realpath(project_root), "the project's root")):
        if folder == other or _strictly_below(other, folder):
            raise LocationError(f"{folder} is {what} or a folder above it; the cache needs a folder of its own")
    if os.path.dirname(folder) == folder:
        raise LocationError(f"{folder} is the filesystem root; the cache needs a folder of its own")


def _at_or_below(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


def _strictly_below(path: str, folder: str) -> bool:
    return path != folder and os.path.commonpath([path, folder]) == folder


def owned(folder: str) -> bool:
    """Whether ``folder`` holds graphfix's tag as a regular file."""
    return _holds(os.path.join(folder, TAG_NAME), TAG)


def check_usable(folder: str) -> None:
    """Raise LocationError when ``folder`` exists and is neither graphfix's nor empty."""
    try:
        info = os.lstat(folder)
    except (FileNotFoundError, NotADirectoryError):  # nothing there yet (making it may still fail)
        return
    if not stat.S_ISDIR(info.st_mode):
        raise LocationError(f"{folder} is not a folder")
    if not owned(folder) and os.listdir(folder) and not _being_claimed(folder):
        raise LocationError(f"{folder} holds files and is not a graphfix cache (no {TAG_NAME} of graphfix's); "
                            "graphfix keeps its cache only in a folder it created")


def claim(folder: str) -> None:
    """Make ``folder`` graphfix's cache: create it (and its parents) or take it empty, then mark it.
    Raises LocationError (not graphfix's) or OSError (cannot write)."""
    check_usable(folder)
    os.makedirs(folder, exist_ok=True)
    if owned(folder):
        return
    for name, text in MARKERS:  # the tag last: it says "all of this is ours"
        path = os.path.join(folder, name)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except FileExistsError:
            if _holds(path, text, partly=True):
                continue  # another graphfix claims the folder at this moment (two runs started together)
            raise
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)


def _being_claimed(folder: str) -> bool:
    """The folder holds only graphfix's markers, whole or still being written: another run is
    claiming it at this moment (or has just done so, after an ``owned`` that read its tag half
    written)."""
    markers = dict(MARKERS)
    listed = os.listdir(folder)
    return all(name in markers and _holds(os.path.join(folder, name), markers[name], partly=True) for name in listed) or owned(folder)


def version_folder(folder: str, version: str) -> str:
    """The folder of one version's indexes, made in graphfix's own folder; never a link."""
    path = os.path.join(folder, version)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path)
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        raise OSError(f"{path} is not a folder graphfix made")
    return path


def clean(folder: str) -> Optional[list[str]]:
    """Remove what graphfix wrote in its cache ``folder``; None when it is not graphfix's (nothing
    removed), else the names of the entries left because graphfix did not write them."""
    if not owned(folder):
        return None
    kept = []
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name in (TAG_NAME, IGNORE_NAME):
                continue
            if not (VERSION_FOLDER.match(entry.name) and entry.is_dir(follow_symlinks=False) and _clean_version(entry.path)):
                kept.append(entry.name)
    if _holds(os.path.join(folder, IGNORE_NAME), IGNORE):
        os.unlink(os.path.join(folder, IGNORE_NAME))
    elif os.path.lexists(os.path.join(folder, IGNORE_NAME)):
        kept.append(IGNORE_NAME)
    os.unlink(os.path.join(folder, TAG_NAME))
    if not kept:
        os.rmdir(folder)
    return sorted(kept)


def _clean_version(path: str) -> bool:
    """Remove a version folder's index and temporary files; whether the folder went with them."""
    with os.scandir(path) as entries:
        for entry in entries:
            ours = INDEX_FILE.match(entry.name) or temp_files.NAME.match(entry.name)
            if ours and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
    try:
        os.rmdir(path)
    except OSError:  # it holds something graphfix did not write
        return False
    return True


def _holds(path: str, text: str, partly: bool = False) -> bool:
    """Whether ``path`` is a regular file (not a link) holding exactly ``text`` (``partly``: or
    the start of it, as another run writes it)."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return False
        with open(path, encoding="utf-8", errors="replace") as handle:
            held = handle.read(len(text) + 1)
        return held == text or partly and text.startswith(held)
    except OSError:
        return False
