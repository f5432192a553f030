"""The changes of one repository as files: for patches and branches."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Sequence

from fixer import temp_files
from fixer.batch.report import changed
from fixer.batch.units import Repository
from fixer.diff import unified_diff
from fixer.engine import FileResult
from fixer.output import fix_marker
from fixer.rule import Diagnostic
from fixer.source import SourceError, decode, read_bytes


@dataclass
class Change:
    name: str  # relative to the repository's git root (or its folder), with '/'
    path: str
    fixed: bytes  # the file's new bytes, in its own encoding
    diff: bytes  # a git-style diff of it, in the file's encoding
    findings: list[str]  # "name:line:col: CODE [*] message" of each finding in the file


def changes(repo: Repository, results: Sequence[FileResult], fix: bool) -> tuple[list[Change], list[str]]:
    """The changed files of ``repo`` and the problems met (a file changed since it was read)."""
    base = repo.git_root or repo.root
    found, problems = [], []
    for result in sorted(results, key=lambda r: r.path):
        if not changed(result, fix):
            continue
        name = os.path.relpath(os.path.abspath(result.path), base).replace(os.sep, "/")
        try:
            source = decode(read_bytes(result.path))
        except SourceError as exc:
            problems.append(f"{name}: {exc}")
            continue
        if source.text != (result.fixed if fix else result.original):
            problems.append(f"{name}: changed while being checked; left out")
            continue
        encoding = "utf-8" if source.encoding == "utf-8-sig" else source.encoding
        diff = unified_diff(result.path, result.original, result.fixed, name=name)
        fixed = result.fixed.encode(source.encoding)
        # the commit's legend: [*] safe, [-] may change gradients, whatever --unsafe-fixes applied
        findings = [f"{name}:{_where(d)}: {d.code} {fix_marker(d, unsafe=False)}{d.message}" for d in result.diagnostics]
        found.append(Change(name, result.path, fixed, diff.encode(encoding, "surrogateescape"), findings))
    return found, problems


def _where(d: Diagnostic) -> str:
    return (f"cell {d.cell}:" if d.cell is not None else "") + f"{d.line}:{d.col + 1}"


def patch_name(repo: Repository, taken: set[str]) -> str:
    """``<folder name>.patch``, made unique in the run."""
    stem = os.path.basename(repo.root.rstrip(os.sep)) or "root"
    name, number = f"{stem}.patch", 1
    while name in taken:
        number += 1
        name = f"{stem}-{number}.patch"
    taken.add(name)
    return name


def write_patch(folder: str, name: str, found: Sequence[Change]) -> Optional[str]:
    """Write the patch whole (a kill leaves the old file or the new one); its path, or None when
    there is nothing to write."""
    if not found:
        return None
    path = os.path.join(folder, name)
    temp_files.write_whole(path, b"".join(change.diff for change in found))
    return path
