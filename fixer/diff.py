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


_C_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def git_quote(name: str) -> str:
    """A path as git writes it in diff headers: C-quoted when it holds a control character, a
    double quote or a backslash (git apply reads such names only quoted); as is otherwise."""
    if not any(char in _C_ESCAPES or ord(char) < 0x20 or ord(char) == 0x7F for char in name):
        return name
    quoted = "".join(
        _C_ESCAPES.get(char) or (f"\\{ord(char):03o}" if ord(char) < 0x20 or ord(char) == 0x7F else char) for char in name
    )
    return f'"{quoted}"'


def unified_diff(path: str, before: str, after: str) -> str:
    name = display_path(path).lstrip("/")
    old = split_lines(before)
    new = split_lines(after)
    a_name, b_name = git_quote(f"a/{name}"), git_quote(f"b/{name}")
    lines = difflib.unified_diff(old, new, a_name, b_name, n=3)
    out: list[str] = []
    for line in lines:
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n") + "\n")
        elif line.endswith("\n") or line.endswith("\r"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    if out:
        out.insert(0, f"diff --git {a_name} {b_name}\n")
    return "".join(out)
