"""The one applier: turns the fixes of a pass into new source text."""

from __future__ import annotations

from typing import Iterable

from fixer.rule import Diagnostic, Edit


def select_fixes(diagnostics: Iterable[Diagnostic], unsafe: bool) -> list[Diagnostic]:
    """Fixable diagnostics whose fixes do not overlap an earlier one; the rest wait for the next pass."""
    chosen: list[Diagnostic] = []
    taken: list[tuple[int, int]] = []
    for diagnostic in sorted(diagnostics, key=lambda d: d.sort_key):
        fix = diagnostic.fix
        if fix is None or (fix.applicability.value == "unsafe" and not unsafe):
            continue
        spans = [(e.start, e.end) for e in fix.edits]
        if any(_overlaps(span, other) for span in spans for other in taken):
            continue
        taken.extend(spans)
        chosen.append(diagnostic)
    return chosen


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
