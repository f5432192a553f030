"""Unified diffs with git-style headers, so ``graphfix --diff . | git apply`` works."""

from __future__ import annotations

import difflib
from collections import Counter
import os
from typing import Optional

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


def unified_diff(path: str, before: str, after: str, cell: Optional[int] = None, name: Optional[str] = None) -> str:
    """A git-style diff; for a notebook ``cell``, ruff's ``--- path:cell N`` headers, without
    the ``diff --git`` line: git cannot apply a cell's diff to the JSON file. ``name``: the path
    to write in the headers (default: ``path`` relative to the current folder)."""
    name = name or display_path(path).lstrip("/")
    if cell is not None and not before.endswith(("\n", "\r")) and not after.endswith(("\n", "\r")):
        before, after = before + "\n", after + "\n"  # a cell's last line has no line break, by convention
    old = split_lines(before)
    new = split_lines(after)
    if cell is not None:
        a_name = b_name = f"{display_path(path)}:cell {cell}"
    else:
        a_name, b_name = git_quote(f"a/{name}"), git_quote(f"b/{name}")
    out: list[str] = []
    for group in _AnchoredMatcher(old, new).get_grouped_opcodes(3):
        first, last = group[0], group[-1]
        out.append(f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            out.extend(_marked(" ", old[i1:i2]) if tag == "equal" else _marked("-", old[i1:i2]) + _marked("+", new[j1:j2]))
    if out:
        out[:0] = [f"--- {a_name}\n", f"+++ {b_name}\n"]
        if cell is None:
            out.insert(0, f"diff --git {a_name} {b_name}\n")
    return "".join(out)


def _range(start: int, stop: int) -> str:
    """A hunk range as unified diffs write it: 1-based start, and the length unless it is 1."""
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _marked(mark: str, lines: list[str]) -> list[str]:
    return [mark + line if line.endswith(("\n", "\r")) else f"{mark}{line}\n\\ No newline at end of file\n" for line in lines]


class _AnchoredMatcher(difflib.SequenceMatcher):
    """difflib's matcher, first split at anchors: lines found exactly once in each text, in the same
    order (the patience diff's idea). Fixes are local, so what lies between anchors is small, and
    a file with thousands of fixes is diffed in linear time instead of difflib's quadratic search."""

    def __init__(self, a: list[str], b: list[str]):
        super().__init__(None, a, b)

    def get_opcodes(self) -> list[tuple[str, int, int, int, int]]:
        a, b = self.a, self.b
        opcodes: list[tuple[str, int, int, int, int]] = []
        i0 = j0 = 0
        for i, j in [*_anchors(a, b), (len(a), len(b))]:
            if i > i0 or j > j0:
                gap = difflib.SequenceMatcher(None, a[i0:i], b[j0:j])
                opcodes.extend((tag, i1 + i0, i2 + i0, j1 + j0, j2 + j0) for tag, i1, i2, j1, j2 in gap.get_opcodes())
            if i < len(a):
                opcodes.append(("equal", i, i + 1, j, j + 1))
            i0, j0 = i + 1, j + 1
        merged: list[tuple[str, int, int, int, int]] = []
        for op in opcodes:
            if merged and op[0] == merged[-1][0] == "equal":
                merged[-1] = ("equal", merged[-1][1], op[2], merged[-1][3], op[4])
            else:
                merged.append(op)
        return merged or [("equal", 0, 0, 0, 0)]


def _anchors(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    """(i, j) of lines unique in both texts, the longest run of them in the same order."""
    count_a, count_b = Counter(a), Counter(b)
    in_b = {line: j for j, line in enumerate(b) if count_b[line] == 1}
    pairs = [(i, in_b[line]) for i, line in enumerate(a) if count_a[line] == 1 and line in in_b]
    # longest increasing subsequence of j (patience sorting with back links)
    tails: list[int] = []  # index into pairs of the smallest tail of each length
    back: list[int] = []
    for index, (_, j) in enumerate(pairs):
        length = _lower_bound(pairs, tails, j)
        back.append(tails[length - 1] if length else -1)
        if length == len(tails):
            tails.append(index)
        else:
            tails[length] = index
    chain, index = [], tails[-1] if tails else -1
    while index >= 0:
        chain.append(pairs[index])
        index = back[index]
    return chain[::-1]


def _lower_bound(pairs: list[tuple[int, int]], tails: list[int], j: int) -> int:
    low, high = 0, len(tails)
    while low < high:
        middle = (low + high) // 2
        if pairs[tails[middle]][1] < j:
            low = middle + 1
        else:
            high = middle
    return low
