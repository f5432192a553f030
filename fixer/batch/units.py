"""The repositories of a batch run: paths given, every folder inside ``--repos-in DIR``, and the
lines of ``--repos-from FILE`` (one path per line, relative to the current folder; ``#`` at the
start of a line or after a space starts a comment, so ``proj#1`` is a name; ``-`` reads the list
from stdin). A repository named twice (``r``, ``./r``, a symlink to it) is checked once."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from fixer.diff import display_path
from fixer.discovery import SKIP_DIRS


COMMENT = re.compile(r"(^|\s)#.*")


class UnitError(Exception):
    pass


@dataclass(frozen=True)
class Repository:
    path: str  # as given
    root: str  # absolute: cross-file analysis stays inside it
    git_root: Optional[str]  # the folder holding .git at or above root (patch paths are relative to it)

    @property
    def name(self) -> str:
        return display_path(self.path)


def repositories(paths: Sequence[str], repos_in: Sequence[str], repos_from: Sequence[str]) -> list[Repository]:
    """Every repository named, each once, in the order given. Raises UnitError for a list or
    folder that cannot be read."""
    named = list(paths)
    for folder in repos_in:
        named.extend(_folders_in(folder))
    for listing in repos_from:
        named.extend(_lines_of(listing))
    found: dict[str, Repository] = {}
    for path in named:
        root = os.path.abspath(path)
        key = os.path.realpath(root)
        if key not in found:
            found[key] = Repository(path, root, git_root(root))
    return list(found.values())


def _folders_in(folder: str) -> Iterable[str]:
    try:
        with os.scandir(folder) as scan:
            names = sorted(e.name for e in scan if e.is_dir() and not e.name.startswith(".") and e.name not in SKIP_DIRS)
    except OSError as exc:
        raise UnitError(f"--repos-in {folder}: {exc.strerror or exc}") from None
    return [os.path.join(folder, name) for name in names]


def _lines_of(listing: str) -> Iterable[str]:
    try:
        text = sys.stdin.read() if listing == "-" else open(listing, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UnitError(f"--repos-from {listing}: {getattr(exc, 'strerror', None) or exc}") from None
    lines = (COMMENT.sub("", line).strip() for line in text.splitlines())
    return [line for line in lines if line]


def git_root(path: str) -> Optional[str]:
    """The nearest folder at or above ``path`` holding ``.git`` (read from the disk, git is not run)."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    while True:
        if os.path.lexists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
