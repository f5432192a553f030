"""The engine on an editor's buffer: its findings, and the text each fix gives. Knows no LSP
library (the protocol module translates); never writes to disk and never runs the code it reads."""

from __future__ import annotations

import ast
import bisect
import dataclasses
import warnings
from dataclasses import dataclass
from typing import Optional

from fixer.analysis.project_files import forget_project_files
from fixer.apply import apply_edits
from fixer.engine import Options, process_source
from fixer.rule import Diagnostic, Edit
from fixer.source import Source, detect_newline, split_lines


@dataclass(frozen=True)
class Checked:
    text: str
    diagnostics: list[Diagnostic]
    errors: list[str]  # why the buffer was not analysed (syntax error mid-typing), or rule crashes


def _source(text: str) -> tuple[bytes, Source]:
    # The editor's buffer is text already: no encoding to guess, whatever a coding cookie says.
    return text.encode("utf-8", "surrogatepass"), Source(text, "utf-8", detect_newline(text))


def _without_bom(text: str) -> tuple[str, str]:
    """(the BOM some clients send as the buffer's first character, the code after it): the CLI
    reads past it, and Python's parser refuses it in text."""
    return ("\ufeff", text[1:]) if text.startswith("\ufeff") else ("", text)


def _shifted(d: Diagnostic, by: int) -> Diagnostic:
    """``d`` found in the code after a prefix of ``by`` characters on line 1, placed in the buffer."""
    def at(line: int, column: int) -> int:
        return column + by if line == 1 else column

    fix = d.fix and dataclasses.replace(d.fix, edits=tuple(
        Edit(e.start + by, e.end + by, e.text, (e.location[0], at(*e.location)), (e.end_location[0], at(*e.end_location)))
        for e in d.fix.edits
    ))
    return dataclasses.replace(d, col=at(d.line, d.col), end_col=at(d.end_line, d.end_col), fix=fix)


def check(path: str, text: str, options: Options) -> Checked:
    forget_project_files()  # the files the buffer imports may have changed since the last check
    bom, code = _without_bom(text)
    data, source = _source(code)
    result = process_source(path, data, dataclasses.replace(options, fix=False, write=False), source)
    return Checked(text, [_shifted(d, len(bom)) for d in result.diagnostics] if bom else result.diagnostics, result.errors)


def fix_all(path: str, text: str, options: Options) -> Optional[str]:
    """The buffer with every fix ``options`` allows (safe ones, and unsafe ones if enabled), verified
    as ``--fix`` verifies it (it parses, a second pass converges); None when nothing changes."""
    forget_project_files()
    bom, code = _without_bom(text)
    data, source = _source(code)
    result = process_source(path, data, dataclasses.replace(options, fix=True, write=False), source)
    return bom + result.fixed if result.changed and not result.errors else None


def fix_one(text: str, diagnostic: Diagnostic) -> Optional[str]:
    """The buffer with this finding's fix alone; None if it has none or the result does not parse."""
    if diagnostic.fix is None:
        return None
    newline = detect_newline(text)
    padded = text + newline if text and not text.endswith(("\n", "\r")) else text  # as the engine pads
    try:
        fixed = apply_edits(padded, diagnostic.fix.edits)
    except ValueError:
        return None
    if padded is not text and fixed.endswith(newline):
        fixed = fixed[: -len(newline)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(_without_bom(fixed)[1])
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return fixed if fixed != text else None


def changed_span(old: str, new: str) -> tuple[int, int, str]:
    """One replacement (start, end, text) turning ``old`` into ``new``: the part between their common
    prefix and suffix, so the editor keeps cursor and marks outside it."""
    limit = min(len(old), len(new))
    start = 0
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[len(old) - 1 - end] == new[len(new) - 1 - end]:
        end += 1
    return start, len(old) - end, new[start : len(new) - end]


class Lines:
    """Offsets <-> (0-based line, character) with Python's line breaks, which are LSP's too
    (never form feed or U+2028, where ``str.splitlines`` would break)."""

    def __init__(self, text: str):
        self.lines = split_lines(text) or [""]
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def position(self, offset: int) -> tuple[int, int]:
        offset = max(0, min(offset, self.starts[-1]))
        line = min(bisect.bisect_right(self.starts, offset) - 1, len(self.lines) - 1)
        if offset == self.starts[-1] and self.lines[-1].endswith(("\n", "\r")):
            return len(self.lines), 0  # end of a buffer that ends with a line break
        return line, offset - self.starts[line]

    def text_of(self, line: int) -> str:
        return self.lines[line] if 0 <= line < len(self.lines) else ""
