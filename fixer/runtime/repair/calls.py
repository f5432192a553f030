"""Repairs of one backward or ``grad`` call's keywords: drop a ``retain_graph`` whose graph no
backward walks again (GF302); ``create_graph=True`` on a ``grad`` call whose result enters the
loss (GF107), its ``retain_graph=True`` dropped (create_graph keeps the graph)."""

from __future__ import annotations

import ast
from typing import Iterator

from fixer.edits.keywords import keyword_edit, remove_keyword
from fixer.nodes import walk
from fixer.rule import Edit
from fixer.runtime.report import Finding, Piece
from fixer.runtime.repair.candidate import Candidate, candidate, context, statement_at


def _calls(piece: Piece, keyword: str, present: bool):
    ctx = context(piece.filename)
    stmt = statement_at(ctx, piece.line) if ctx is not None else None
    if stmt is None:
        return ctx, []
    calls = [n for n in walk(stmt) if isinstance(n, ast.Call) and any(k.arg == keyword for k in n.keywords) == present]
    return ctx, calls


def drop_retain(finding: Finding, piece: Piece) -> Iterator[Candidate]:
    ctx, calls = _calls(piece, "retain_graph", True)
    if calls:
        found = candidate(f"drop retain_graph at line {piece.line}", ctx, [remove_keyword(ctx, calls[0], "retain_graph")], finding)
        if found is not None:
            yield found


def create_graph(finding: Finding, piece: Piece) -> Iterator[Candidate]:
    ctx, calls = _calls(piece, "create_graph", False)
    calls = [c for c in calls if isinstance(c.func, (ast.Attribute, ast.Name)) and getattr(c.func, "attr", getattr(c.func, "id", "")) == "grad"]
    if not calls:
        return
    call = calls[0]
    retain = next((k for k in call.keywords if k.arg == "retain_graph"), None)
    if retain is not None:
        edits = [Edit(*ctx.span(retain), "create_graph=True")]
    else:
        edits = [keyword_edit(ctx, call, "create_graph")]
    found = candidate(f"create_graph=True at line {piece.line}", ctx, edits, finding)
    if found is not None:
        yield found
