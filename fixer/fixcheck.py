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
        """The range [start, end] of the text after the edits overlaps or touches what they wrote.
        The replacements are disjoint and in order, so their ends ascend: the last one starting
        at or before ``end`` is the only one to test."""
        index = bisect.bisect_right(self._new_starts, end) - 1
        return index >= 0 and start <= self._new[index][1]

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
        self._by_code: dict[str, list[tuple[int, int, int, Diagnostic]]] = {}  # (start, order, end, finding), sorted
        for order, diagnostic in enumerate(before):
            start, end = span(diagnostic, starts)
            self._exact.setdefault((diagnostic.code, start, end), diagnostic)
            self._by_code.setdefault(diagnostic.code, []).append((start, order, end, diagnostic))
        for spans in self._by_code.values():
            spans.sort(key=lambda item: item[:2])

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
            found.append((self._first_within(diagnostic.code, start_lo, start_hi, end_lo, end_hi), key))
        return found

    def _first_within(self, code: str, start_lo: int, start_hi: int, end_lo: int, end_hi: int) -> Optional[Diagnostic]:
        """The first finding (in the order given) of ``code`` starting in [start_lo, start_hi] and
        ending in [end_lo, end_hi]: those starting there are found by bisection, not by a scan."""
        spans = self._by_code.get(code, [])
        index = bisect.bisect_left(spans, (start_lo, -1))  # (start, order) decide: orders differ
        matches = []
        while index < len(spans) and spans[index][0] <= start_hi:
            if end_lo <= spans[index][2] <= end_hi:
                matches.append(spans[index][1:])
            index += 1
        return min(matches, key=lambda item: item[0])[2] if matches else None
