"""A runtime finding in graphfix's usual shape: ``path:line:col: GFxxx message``, followed by
the evidence, one place per line, as AddressSanitizer names allocation, free and use."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Optional

from fixer.diff import display_path
from fixer.runtime.sites import Stack, source_line


@dataclass(frozen=True)
class Piece:
    role: str  # "built", "freed by", "used again", "failed", "changed by", ...
    filename: str
    line: int
    iteration: Optional[int]  # the count (1: the first iteration), None when not known; said as nth()
    source: str

    @staticmethod
    def at(role: str, stack: Stack, iteration: Optional[int], level: int = 0) -> Optional["Piece"]:
        if not stack:
            return None
        code, line = stack[min(level, len(stack) - 1)]
        return Piece(role, code.co_filename, line, iteration, source_line(code, line))


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    filename: str
    line: int
    col: int  # 0-based
    error: str  # the RuntimeError's first line
    evidence: tuple[Piece, ...] = field(default=())

    @staticmethod
    def at(code: str, message: str, where: Piece, error: str, evidence: list) -> "Finding":
        text = _line_text(where.filename, where.line)
        col = len(text) - len(text.lstrip()) if text.strip() else 0
        return Finding(code, message, where.filename, where.line, col, error.split(". ")[0] if error else "", tuple(p for p in evidence if p))

    @property
    def name(self) -> str:
        from fixer.registry import by_code

        try:
            return by_code(self.code).name
        except KeyError:
            return ""


def _line_text(filename: str, line: int) -> str:
    import linecache

    return linecache.getline(filename, line)


_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def nth(count: Optional[int]) -> str:
    """An iteration said plainly ("the second iteration"), never as a number a reader could take for
    the program's own loop index (0-based, or an epoch): ``first``, ``second``, ..., ``11th``."""
    if count is None:
        return "a later"
    if 1 <= count <= len(_ORDINALS):
        return _ORDINALS[count - 1]
    suffix = "th" if 10 <= count % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(count % 10, "th")
    return f"{count}{suffix}"


def _where(piece: Piece) -> str:
    iteration = f" ({nth(piece.iteration)} iteration)" if piece.iteration is not None else ""
    return f"{display_path(piece.filename)}:{piece.line}{iteration}"


def text_lines(findings: list[Finding]) -> list[str]:
    lines = []
    for f in findings:
        lines.append(f"{display_path(f.filename)}:{f.line}:{f.col + 1}: {f.code} {f.message}")
        width = max((len(p.role) for p in f.evidence), default=0)
        for piece in f.evidence:
            lines.append(f"    {piece.role + ':':<{width + 1}} {_where(piece)}: {piece.source}")
        if f.error:
            lines.append(f"    (the program raised: RuntimeError: {f.error})")
    return lines


def as_json(findings: list[Finding]) -> str:
    records = [
        {
            "code": f.code,
            "name": f.name,
            "message": f.message,
            "filename": display_path(f.filename),
            "location": {"row": f.line, "column": f.col + 1},
            "error": f.error,
            "evidence": [{**asdict(p), "filename": display_path(p.filename)} for p in f.evidence],
        }
        for f in findings
    ]
    return json.dumps(records, indent=2)
