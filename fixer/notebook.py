"""Jupyter notebooks (nbformat 4) as one Python program, and back.

The code cells are joined into one program, in order, so a loop in one cell and the backward in
the next are analysed together; IPython syntax is neutralised (fixer.magics). Cells are separated
by a comment line unique to the notebook, which the analysis ignores and fixes move with the code
around them: after fixing, the program is cut at those lines back into cells. Positions are
reported as ruff does: ``cell N`` is the cell's 1-based index among all cells, lines count within it.

A cell that still is not Python after that (shell commands IPython would reject too, or a typo)
would make the whole notebook unparsable: where the program does not parse, each such cell is left
out with a warning naming it, and the other cells are checked (as ruff does).

Writing back touches only the ``source`` values of the cells whose code changed, spliced into the
original JSON text: metadata, outputs, key order, indentation and the final newline stay
byte-identical. A changed source keeps its form (one string, or a list of lines as Jupyter writes
it, with the list's own layout and escaping); unchanged lines keep their exact JSON text."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Iterator, Optional

from fixer.magics import Replacement, neutralise
from fixer.rule import Diagnostic
from fixer.source import SourceError, detect_newline, split_lines


class NotebookError(SourceError):
    """A notebook that cannot be read, or a fix that cannot be written back into it."""


_SPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class _Cell:
    number: int  # 1-based index among all cells
    source: str
    span: tuple[int, int]  # of the source value in the JSON text
    items: Optional[list[tuple[int, int]]]  # spans of the list's strings; None if one string


@dataclass(frozen=True)
class Notebook:
    text: str  # the JSON document
    cells: list[_Cell]  # code cells
    is_python: bool


def parse_notebook(text: str) -> Notebook:
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError; a 5,000-digit number; nesting too deep
        raise NotebookError(f"cannot read notebook: invalid JSON ({str(exc) or type(exc).__name__})") from None
    if not isinstance(document, dict):
        raise NotebookError("cannot read notebook: the JSON document is not an object")
    version = document.get("nbformat")
    if "worksheets" in document or (version is not None and (type(version) is not int or version != 4)):
        raise NotebookError(
            f"cannot read notebook: nbformat {json.dumps(version)} is not supported, only nbformat 4 "
            "(`jupyter nbconvert --to notebook` converts it)"
        )
    if not isinstance(document.get("cells"), list):
        raise NotebookError("cannot read notebook: no `cells` list")
    cells = []
    for number, (cell, members) in enumerate(zip(document["cells"], _cell_members(text)), start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(item, str) for item in source):
            items = list(_items(text, members["source"][0])) if "source" in members else []
            source = "".join(source)
        elif isinstance(source, str):
            items = None
        else:
            raise NotebookError(f"cannot read notebook: cell {number}: `source` is not text")
        span = members.get("source", (0, 0))
        cells.append(_Cell(number, source, span, items))
    return Notebook(text, cells, _is_python(document.get("metadata")))


def _is_python(metadata: object) -> bool:
    """False for notebooks of another kernel language (R, Julia...); unknown counts as Python."""
    if not isinstance(metadata, dict):
        return True
    for key, field in (("language_info", "name"), ("kernelspec", "language")):
        info = metadata.get(key)
        if isinstance(info, dict) and isinstance(info.get(field), str) and info[field].lower() != "python":
            return False
    return True


# --- where things are in the JSON text ---------------------------------------------------------
def _skip(text: str, index: int) -> int:
    return _SPACE.match(text, index).end()


def _members(text: str, index: int) -> Iterator[tuple[str, int, int]]:
    """(key, value start, value end) of the object starting at ``text[index]``."""
    index = _skip(text, index + 1)
    while text[index] != "}":
        key, end = json.decoder.scanstring(text, index + 1)
        index = _skip(text, _skip(text, end) + 1)  # past the ':'
        _, end = _DECODER.raw_decode(text, index)
        yield key, index, end
        index = _skip(text, end)
        index = _skip(text, index + 1) if text[index] == "," else index


def _items(text: str, index: int) -> Iterator[tuple[int, int]]:
    """Spans of the values of the array starting at ``text[index]``."""
    index = _skip(text, index + 1)
    while text[index] != "]":
        _, end = _DECODER.raw_decode(text, index)
        yield index, end
        index = _skip(text, end)
        index = _skip(text, index + 1) if text[index] == "," else index


def _cell_members(text: str) -> Iterator[dict[str, tuple[int, int]]]:
    """For each cell, its members' value spans (the last of a repeated key, as json.loads keeps)."""
    cells = [(start, end) for key, start, end in _members(text, _skip(text, 0)) if key == "cells"][-1]
    for start, _ in _items(text, cells[0]):
        yield {key: (a, b) for key, a, b in _members(text, start)} if text[start] == "{" else {}


# --- the program ---------------------------------------------------------------------------------
@dataclass
class Program:
    text: str
    newline: str
    marker: str  # the separator line's text, without its line break
    numbers: list[int]  # cell numbers of the program's cells, in order
    replacements: list[Replacement]
    rows: list[tuple[int, int]]  # program line (0-based) -> (cell number, line in cell)
    skipped: list[str] = dataclasses.field(default_factory=list)  # why each left-out cell was not checked

    def where(self, line: int) -> str:
        cell, row = self.locate(line)
        return f"cell {cell}, line {row}"

    def locate(self, line: int) -> tuple[int, int]:
        if not self.rows:
            return (self.numbers[0] if self.numbers else 1), line
        return self.rows[min(max(line, 1), len(self.rows)) - 1]

    def diagnostic(self, d: Diagnostic) -> Diagnostic:
        """``d`` with its lines counted in its cell (and IPython escapes shown as written)."""
        cell, line = self.locate(d.line)
        end_cell, end_line = self.locate(d.end_line)
        end_line = end_line if end_cell == cell else line
        fix = d.fix
        if fix is not None:
            edits = tuple(dataclasses.replace(e, location=self._row(e.location), end_location=self._row(e.end_location)) for e in fix.edits)
            fix = dataclasses.replace(fix, edits=edits)
        return dataclasses.replace(d, message=self.restore(d.message), line=line, end_line=end_line, cell=cell, fix=fix)

    def _row(self, location: tuple[int, int]) -> tuple[int, int]:
        return self.locate(location[0])[1], location[1]

    def restore(self, text: str) -> str:
        for program, original in self.replacements:
            if program in text:
                text = text.replace(program, original)
        return text

    def reread(self, text: str) -> "Program":
        """The program after fixes: its own line map; refused if a fix broke a cell boundary."""
        program = Program(text, self.newline, self.marker, self.numbers, self.replacements, [], self.skipped)
        program.rows = _rows(text, self.marker, self.numbers)
        return program


def program_of(notebook: Notebook) -> Program:
    """The notebook's program; where it does not parse, the one without its unparsable cells (the
    engine decides the same from its own parse, to parse a notebook once)."""
    program = build_program(notebook)
    return build_program(notebook, skip_unparsable=True) if unparsable(program.text) else program


def unparsable(text: str) -> Optional[str]:
    """Why ``text`` is not Python (None: it parses, or the parser gave up for want of memory or
    stack, which the engine reports for the whole file)."""
    try:
        ast.parse(text)
    except SyntaxError as exc:
        return f"{exc.msg} (line {exc.lineno or 1})"
    except ValueError as exc:
        return str(exc)
    except (RecursionError, MemoryError):
        return None
    return None


def build_program(notebook: Notebook, skip_unparsable: bool = False) -> Program:
    """The code cells as one program; with ``skip_unparsable``, the cells that do not parse on
    their own are left out (``Program.skipped`` says which and why)."""
    code = "".join(cell.source for cell in notebook.cells)
    base = "_ipython_"
    while base in code:
        base = "_" + base
    counter = iter(range(1 << 62))
    newline = detect_newline(code) if code else "\n"
    parts, numbers, replacements, skipped = [], [], [], []
    for cell in notebook.cells:
        neutral = neutralise(cell.source, lambda: f"{base}{next(counter)}_")
        if neutral is None:
            continue
        text, replaced = neutral
        problem = unparsable(text) if skip_unparsable else None
        if problem:
            skipped.append(f"cell {cell.number} was not checked: cannot parse: {problem}")
            continue
        if text and not text.endswith(("\n", "\r")):
            text += newline  # taken off again when the cell is written back
        parts.append(text)
        numbers.append(cell.number)
        replacements.extend(replaced)
    marker = f"#{base}cell_boundary"
    text = (marker + newline).join(parts)
    return Program(text, newline, marker, numbers, replacements, _rows(text, marker, numbers), skipped)


def _rows(text: str, marker: str, numbers: list[int]) -> list[tuple[int, int]]:
    rows, cell, row = [], 0, 0
    for line in split_lines(text):
        if line.rstrip("\r\n") == marker:
            cell, row = cell + 1, 0
            rows.append((numbers[min(cell, len(numbers) - 1)], 1))
            continue
        row += 1
        rows.append((numbers[min(cell, len(numbers) - 1)], row))
    if numbers and cell != len(numbers) - 1:
        raise NotebookError("a fix would move a boundary between notebook cells; notebook left unchanged")
    return rows


def cell_sources(notebook: Notebook, program: Program) -> dict[int, str]:
    """Each analysed cell's source as the (fixed) program has it, IPython escapes restored."""
    text = program.text
    for fragment, original in program.replacements:
        if text.count(fragment) != 1:
            raise NotebookError("a fix would move an IPython magic; notebook left unchanged")
        text = text.replace(fragment, original)
    lines = split_lines(text)
    pieces: list[list[str]] = [[]]
    for line in lines:
        if line.rstrip("\r\n") == program.marker:
            pieces.append([])
        else:
            pieces[-1].append(line)
    originals = {cell.number: cell.source for cell in notebook.cells}
    sources = {}
    for number, piece in zip(program.numbers, pieces):
        source = "".join(piece)
        if not originals[number].endswith(("\n", "\r")) and source.endswith(program.newline):
            source = source[: -len(program.newline)]
        sources[number] = source
    return sources


def rebuild(notebook: Notebook, program: Program) -> tuple[str, list[tuple[int, str, str]]]:
    """The notebook's JSON text with the fixed program's cells; and (cell, before, after) of each
    changed cell."""
    sources = cell_sources(notebook, program)
    ascii_only = notebook.text.isascii()  # an all-ASCII file escapes everything else as \\uXXXX
    out, cursor, changes = [], 0, []
    for cell in notebook.cells:
        new = sources.get(cell.number, cell.source)
        if new == cell.source:
            continue
        if cell.span == (0, 0):
            raise NotebookError(f"cell {cell.number} has no `source` to write the fix into; notebook left unchanged")
        out.append(notebook.text[cursor : cell.span[0]])
        out.append(_source_json(notebook.text, cell, new, ascii_only))
        cursor = cell.span[1]
        changes.append((cell.number, cell.source, new))
    out.append(notebook.text[cursor:])
    return "".join(out), changes


def _source_json(text: str, cell: _Cell, new: str, ascii_only: bool) -> str:
    if cell.items is None:
        return json.dumps(new, ensure_ascii=ascii_only)
    known = {}
    for start, end in cell.items:
        known.setdefault(json.loads(text[start:end]), text[start:end])
    # Jupyter splits sources with str.splitlines, at more breaks than Python's (form feed...)
    lines = [known.get(line) or json.dumps(line, ensure_ascii=ascii_only) for line in new.splitlines(True)]
    opening, separator, closing = _list_layout(text, cell)
    return "[" + opening + separator.join(lines) + closing + "]" if lines else "[]"


def _list_layout(text: str, cell: _Cell) -> tuple[str, str, str]:
    """The whitespace after '[', between items (with the comma) and before ']' of a source list."""
    start, end = cell.span
    if cell.items:
        first, last = cell.items[0], cell.items[-1]
        opening, closing = text[start + 1 : first[0]], text[last[1] : end - 1]
        if len(cell.items) > 1:
            return opening, text[first[1] : cell.items[1][0]], closing
        return opening, "," + opening, closing
    # an empty list: one indent step (that of the top-level keys) deeper than the "source" key
    line_start = text.rfind("\n", 0, start) + 1
    line = text[line_start:start]
    key_indent = line[: len(line) - len(line.lstrip(" \t"))]
    first_key = _SPACE.match(text, _skip(text, 0) + 1).group()
    unit = first_key[first_key.rfind("\n") + 1 :]
    if "\n" not in first_key or not unit:
        return "", ", ", ""  # a compact document
    return "\n" + key_indent + unit, ",\n" + key_indent + unit, "\n" + key_indent
