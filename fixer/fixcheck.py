"""Which findings a pass of fixes brought in: each finding of the fixed text is matched to the
findings of the text before the pass through the pass's edits, which are known exactly.

A position of the fixed text outside every replacement maps back to exactly one position of the
text before; a position inside (or at either end of) the replacement of edit [start, end) maps
to any position in [start, end]. A finding after the pass is old when an old finding of the same
code starts and ends where its own start and end map back to: a finding that only moved, or whose
text an edit changed inside or at its ends (a rule's own finding fixed in more than one pass), is
old; a finding whose code was not there, or is there somewhere else, is new."""

from __future__ import annotations

import bisect
from typing import Iterable, Optional, Sequence

from fixer.rule import Diagnostic, Edit
from fixer.source import split_lines

Key = tuple[str, tuple[int, int], tuple[int, int]]


def line_starts(text: str) -> list[int]:
    starts = [0]
    for line in split_lines(text):
        starts.append(starts[-1] + len(line))
    return starts


def span(diagnostic: Diagnostic, starts: list[int]) -> tuple[int, int]:
    """Character offsets of a diagnostic (lines are 1-based, columns 0-based characters)."""
    return starts[diagnostic.line - 1] + diagnostic.col, starts[diagnostic.end_line - 1] + diagnostic.end_col


class EditMap:
    """Offsets of the text after applying ``edits`` (sorted, disjoint) mapped back to the text before."""

    def __init__(self, edits: Iterable[Edit]) -> None:
        self._old: list[tuple[int, int]] = []  # each edit's [start, end] before
        self._new: list[tuple[int, int]] = []  # ... and its replacement's [start, end] after
        shift = 0
        for edit in sorted(edits):
            self._old.append((edit.start, edit.end))
            self._new.append((edit.start + shift, edit.start + shift + len(edit.text)))
            shift += len(edit.text) - (edit.end - edit.start)
        self._new_starts = [start for start, _ in self._new]

    def writes_into(self, start: int, end: int) -> bool:
        """The range [start, end] of the text after the edits overlaps or touches what they wrote."""
        return any(start <= new_end and new_start <= end for new_start, new_end in self._new)

    def back(self, offset: int) -> tuple[int, int]:
        """The range [lo, hi] of offsets before the edits that ``offset`` after them stands for."""
        index = bisect.bisect_right(self._new_starts, offset) - 1
        if index < 0:
            return offset, offset
        new_end = self._new[index][1]
        if offset > new_end:  # in unchanged text after edit ``index``
            position = self._old[index][1] + offset - new_end
            return position, position
        lo, hi = self._old[index]
        while index > 0 and self._new[index - 1][1] == offset:  # adjacent edits share this point
            index -= 1
            lo = self._old[index][0]
        return lo, hi


class Matcher:
    """The findings of the text before a pass, to match the findings after it against."""

    def __init__(self, before_text: str, before: Sequence[Diagnostic]) -> None:
        starts = line_starts(before_text)
        self._exact: dict[tuple[str, int, int], Diagnostic] = {}
        self._by_code: dict[str, list[tuple[int, int, Diagnostic]]] = {}
        for diagnostic in before:
            start, end = span(diagnostic, starts)
            self._exact.setdefault((diagnostic.code, start, end), diagnostic)
            self._by_code.setdefault(diagnostic.code, []).append((start, end, diagnostic))

    def origins(self, after_text: str, after: Sequence[Diagnostic], edits: Iterable[Edit]) -> list[tuple[Optional[Diagnostic], Key]]:
        """For each finding ``after`` the edits: the finding before them it stands for (None: it is
        new), and where it maps back to, (code, start range, end range), which tells new findings of
        two sets of edits apart."""
        mapping, starts = EditMap(edits), line_starts(after_text)
        found: list[tuple[Optional[Diagnostic], Key]] = []
        for diagnostic in after:
            start, end = span(diagnostic, starts)
            key = (diagnostic.code, mapping.back(start), mapping.back(end))
            (start_lo, start_hi), (end_lo, end_hi) = key[1], key[2]
            if start_lo == start_hi and end_lo == end_hi:
                found.append((self._exact.get((diagnostic.code, start_lo, end_lo)), key))
                continue
            old = next(
                (old for s, e, old in self._by_code.get(diagnostic.code, ())
                 if start_lo <= s <= start_hi and end_lo <= e <= end_hi),
                None,
            )
            found.append((old, key))
        return found
