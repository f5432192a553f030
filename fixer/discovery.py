"""Which files to look at: explicit files always; folders recursively, minus virtualenvs, build
output, hidden folders and what .gitignore excludes (asked of git when the folder is in a repo)."""

from __future__ import annotations

import fnmatch
import os
import subprocess
from pathlib import Path
from typing import Iterable, Iterator, Sequence

SKIP_DIRS = frozenset({"__pycache__", "node_modules", "build", "dist", "site-packages", "venv", "__pypackages__"})


def _excluded(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)


def _skip_dir(path: Path, patterns: Sequence[str]) -> bool:
    name = path.name
    if name.startswith(".") or name in SKIP_DIRS or _excluded(name, patterns):
        return True
    return (path / "pyvenv.cfg").exists()  # any virtualenv, whatever its name


def _git_files(root: Path) -> list[Path] | None:
    """Files git would track under ``root`` (tracked + untracked, minus ignored); None outside git."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    names = out.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [root / name for name in names if name.endswith(".py")]


def _walk(root: Path, patterns: Sequence[str]) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        base = Path(folder)
        dirs[:] = sorted(d for d in dirs if not _skip_dir(base / d, patterns))
        for name in sorted(files):
            if name.endswith(".py") and not _excluded(name, patterns):
                yield base / name


def _walk_git(root: Path, files: list[Path], patterns: Sequence[str]) -> Iterator[Path]:
    skipped: dict[Path, bool] = {}
    for path in sorted(files):
        parts = path.relative_to(root).parts
        folder, hidden = root, False
        for part in parts[:-1]:
            folder = folder / part
            if folder not in skipped:
                skipped[folder] = _skip_dir(folder, patterns)
            if skipped[folder]:
                hidden = True
                break
        if not hidden and not _excluded(path.name, patterns) and path.is_file():
            yield path


def discover(paths: Iterable[str], exclude: Sequence[str] = (), respect_gitignore: bool = True) -> list[str]:
    """Python files under ``paths``, each once, in a stable order; missing paths raise FileNotFoundError."""
    seen: dict[str, None] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_file() or (path.exists() and not path.is_dir()):
            seen.setdefault(str(path), None)
            continue
        if not path.is_dir():
            raise FileNotFoundError(raw)
        git_files = _git_files(path) if respect_gitignore else None
        found = _walk_git(path, git_files, exclude) if git_files is not None else _walk(path, exclude)
        for file in found:
            seen.setdefault(str(file), None)
    return list(seen)
