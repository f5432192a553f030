"""A candidate repair: a title that says what it changes, and the fixed text of each file it
changes (``Proposal``, as the static rules' route writes them). Built from the files as they
are now, at the places a finding's evidence names."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import Iterable, Optional

from fixer.apply import apply_edits
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.rule import Edit
from fixer.runtime.report import Finding, Piece
from fixer.runtime.static_fix import Proposal
from fixer.source import decode, read_bytes


@dataclass
class Candidate:
    title: str  # "detach `state` where line 84 stores it"
    proposals: list[Proposal]
    probe: Optional[list[Proposal]] = None  # a cut's probe: the original text, the cut value marked (fixer.runtime.repair.cuts)


def context(filename: str) -> Optional[FileContext]:
    """The file as it is now, parsed; None when it cannot be read or parsed."""
    try:
        text = decode(read_bytes(filename)).text
        return FileContext(os.path.abspath(filename), text)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None


def candidate(title: str, ctx: FileContext, edits: Iterable[Edit], finding: Finding, probe: Optional[Iterable[Edit]] = None) -> Optional[Candidate]:
    """The edits applied to ``ctx``'s text, when they change it and the result parses;
    ``probe``: for a cut, the edits that mark the cut value instead (fixer.runtime.repair.cuts)."""
    edits = list(edits)
    if not edits:
        return None
    fixed = apply_edits(ctx.source, edits)
    try:
        ast.parse(fixed)
    except SyntaxError:
        return None
    if fixed == ctx.source:
        return None
    probed = None
    if probe is not None:
        probed = [Proposal(ctx.path, ctx.source, apply_edits(ctx.source, list(probe)), [finding])]
    return Candidate(title, [Proposal(ctx.path, ctx.source, fixed, [finding])], probed)


def statement_at(ctx: FileContext, line: int) -> Optional[ast.stmt]:
    """The innermost statement that starts at ``line``."""
    found = [n for n in walk(ctx.tree) if isinstance(n, ast.stmt) and n.lineno == line]
    return max(found, key=lambda n: n.col_offset) if found else None


def enclosing_function(ctx: FileContext, node: ast.AST) -> ast.AST:
    """The function (or the module) whose body holds ``node``."""
    for parent in ctx.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return parent
    return ctx.tree


def pieces(finding: Finding, *roles: str) -> list[Piece]:
    """The evidence of those roles (a role ending in a space matches its prefix: ``"stored in "``)."""
    return [p for p in finding.evidence if any(p.role == r or (r.endswith(" ") and p.role.startswith(r)) for r in roles)]


def held_name(piece: Piece) -> str:
    """``stored in self.cache['k']`` -> ``self.cache['k']``."""
    return piece.role[len("stored in "):] if piece.role.startswith("stored in ") else ""
