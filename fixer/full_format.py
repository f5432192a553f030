"""The ``full`` output format (ruff's default): each finding's line, the source around it and a
caret range under what it names, then the fix's title; and colours for ``text`` and ``full``
on a terminal (``--color``, ``NO_COLOR``, ``FORCE_COLOR``).

    train.py:15:5: GF301 [*] `running_loss` accumulates `loss` with its autograd graph ...
       |
    14 |     optimizer.step()
    15 |     running_loss += loss
       |     ^^^^^^^^^^^^^^^^^^^^ GF301
    16 | average = running_loss / 8
       |
       = help: Accumulate `loss.item()`
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, Optional, TextIO

from fixer.diff import display_path
from fixer.printable import printable
from fixer.rule import Diagnostic

LinesFor = Callable[[str, Optional[int]], Optional[list[str]]]  # (path, cell) -> the source's lines
BOLD, RED, CYAN, BLUE, RESET = "\x1b[1m", "\x1b[31m", "\x1b[36m", "\x1b[34m", "\x1b[0m"
CONTEXT = 1  # source lines shown before and after the finding's lines
MOST_LINES = 5  # of a finding that spans more


def color_enabled(choice: str, stream: TextIO) -> bool:
    """``always``/``never``; ``auto``: a terminal, unless ``NO_COLOR`` is set (``FORCE_COLOR``
    forces it), as https://no-color.org asks."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


def paint(text: str, style: str, color: bool) -> str:
    return f"{style}{text}{RESET}" if color and text else text


def header(path: str, d: Diagnostic, marker: str, color: bool) -> str:
    """``path:line:col: GFxxx [*] message`` (``path:cell N:line:col`` in a notebook)."""
    cell = f"cell {d.cell}:" if d.cell is not None else ""
    where = printable(f"{display_path(path)}:{cell}{d.line}:{d.col + 1}")
    return f"{paint(where, BOLD, color)}: {paint(d.code, BOLD + RED, color)} {paint(marker, CYAN, color)}{printable(d.message)}"


def full_lines(items: Iterable[tuple[str, Diagnostic]], markers: Callable[[Diagnostic], str], lines_for: LinesFor, color: bool) -> list[str]:
    out: list[str] = []
    for path, d in items:
        out.append(header(path, d, markers(d), color))
        source = lines_for(path, d.cell)
        if source and 1 <= d.line <= len(source):
            out.extend(_frame(source, d, color))
        out.append("")
    return out


def _frame(source: list[str], d: Diagnostic, color: bool) -> list[str]:
    last = min(max(d.end_line, d.line), d.line + MOST_LINES - 1, len(source))
    first, shown_last = max(1, d.line - CONTEXT), min(len(source), last + CONTEXT)
    width = len(str(shown_last))
    gutter = paint(" " * width + " |", BLUE, color)
    frame = [gutter]
    for number in range(first, shown_last + 1):
        text = printable(source[number - 1].rstrip("\r\n"))
        frame.append(f"{paint(str(number).rjust(width) + ' |', BLUE, color)} {text}".rstrip())
        if number == d.line:
            end = d.end_col if d.end_line == d.line else len(text.rstrip())
            start = min(d.col, len(text))
            lead = "".join(c if c == "\t" else " " for c in text[:start])
            frame.append(f"{gutter} {lead}{paint('^' * max(1, end - start), BOLD + RED, color)} {paint(d.code, BOLD + RED, color)}")
    frame.append(gutter)
    if d.fix is not None and d.fix.title:
        frame.append(f"{' ' * width} = {paint('help', BOLD, color)}: {d.fix.title}")
    return frame
