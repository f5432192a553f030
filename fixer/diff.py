"""Unified diffs with git-style headers, so ``graphfix --diff . | git apply`` works."""

from __future__ import annotations

import difflib
import os

from fixer.source import split_lines


def display_path(path: str) -> str:
    """Relative to the current directory when below it, with forward slashes."""
    if path == "-" or not os.path.isabs(path) and not path.startswith(".."):
        rel = os.path.normpath(path) if path != "-" else path
    else:
        rel = os.path.relpath(path)
        if rel.startswith(".."):
            rel = os.path.abspath(path)
    return rel.replace(os.sep, "/")


def unified_diff(path: str, before: str, after: str) -> str:
    name = display_path(path).lstrip("/")
    old = split_lines(before)
    new = split_lines(after)
    lines = difflib.unified_diff(old, new, f"a/{name}", f"b/{name}", n=3)
    out: list[str] = []
    for line in lines:
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n") + "\n")
        elif line.endswith("\n") or line.endswith("\r"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    if out:
        out.insert(0, f"diff --git a/{name} b/{name}\n")
    return "".join(out)
