"""The one applier: turns the fixes of a pass into new source text."""

from __future__ import annotations

import bisect
from typing import Iterable

from fixer.rule import Diagnostic, Edit


def select_fixes(diagnostics: Iterable[Diagnostic], unsafe: bool) -> list[Diagnostic]:
    """Fixable diagnostics whose fixes do not overlap an earlier one; the rest wait for the next pass.
    A fix whose own edits overlap is never applied."""
    chosen: list[Diagnostic] = []
    taken = _Spans()
    for diagnostic in sorted(diagnostics, key=lambda d: d.sort_key):
        fix = diagnostic.fix
        if fix is None or (fix.applicability.value == "unsafe" and not unsafe):
            continue
        spans = sorted((e.start, e.end) for e in fix.edits)
        if any(_overlaps(a, b) for a, b in zip(spans, spans[1:])) or any(taken.overlaps(span) for span in spans):
            continue
        for span in spans:
            taken.add(span)
        chosen.append(diagnostic)
    return chosen


class _Spans:
    """Disjoint (start, end) spans kept sorted, so a new span is checked against its neighbours only:
    sorted by start, disjoint spans also have ascending ends."""

    def __init__(self) -> None:
        self._spans: list[tuple[int, int]] = []

    def overlaps(self, span: tuple[int, int]) -> bool:
        index = bisect.bisect_right(self._spans, (span[1], span[1]))
        while index > 0:
            index -= 1
            other = self._spans[index]
            if other[1] < span[0]:
                return False
            if _overlaps(span, other):
                return True
        return False

    def add(self, span: tuple[int, int]) -> None:
        bisect.insort(self._spans, span)


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    # Two insertions at one point conflict too: their order would be arbitrary.
    if a[0] == a[1] == b[0] == b[1]:
        return True
    return a[0] < b[1] and b[0] < a[1]


def apply_edits(source: str, edits: Iterable[Edit]) -> str:
    pieces: list[str] = []
    cursor = 0
    for edit in sorted(edits):
        if edit.start < cursor:
            raise ValueError(f"overlapping edits at offset {edit.start}")
        pieces.append(source[cursor : edit.start])
        pieces.append(edit.text)
        cursor = edit.end
    pieces.append(source[cursor:])
    return "".join(pieces)
