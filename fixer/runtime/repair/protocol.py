"""Repairs of the optimizer protocol (GF201, GF203): where ``zero_grad()`` runs.

- **zero_grad wipes the gradient before the step uses it** (GF201): the call moved just before
  the backward that fills the gradient (the expert's usual order: zero, backward, step), else
  just after the step;
- **nothing resets the gradient between steps** (GF203): ``OPT.zero_grad()`` just after the
  step, for the optimizer the step is called on."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.edits.statements import insert_after, move_edits
from fixer.runtime.report import Finding, Piece
from fixer.runtime.repair.candidate import Candidate, candidate, context, pieces, statement_at


def _same_block(ctx, one: ast.stmt, other: ast.stmt) -> bool:
    return ctx.parent(one) is ctx.parent(other)


def move_zero_grad(finding: Finding) -> Iterator[Candidate]:
    wipe = next(iter(pieces(finding, "wiped by")), None)
    if wipe is None:
        return
    ctx = context(wipe.filename)
    zero = statement_at(ctx, wipe.line) if ctx is not None else None
    if zero is None:
        return
    places = [(p, False) for p in pieces(finding, "gradient from")] + [(p, True) for p in pieces(finding, "stepped")]
    for place, after in places:
        anchor = statement_at(ctx, place.line) if place.filename == wipe.filename else None
        if anchor is None or not _same_block(ctx, zero, anchor):
            continue
        edits = move_edits(ctx, zero, anchor, after)
        where = f"after the step at line {place.line}" if after else f"before the backward at line {place.line}"
        found = candidate(f"move zero_grad() (line {wipe.line}) {where}", ctx, edits or [], finding)
        if found is not None:
            yield found


def _stepped_optimizer(stmt: ast.stmt) -> Optional[str]:
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute):
        if stmt.value.func.attr == "step" and not stmt.value.args:
            return ast.unparse(stmt.value.func.value)
    return None


def zero_after_step(finding: Finding) -> Iterator[Candidate]:
    for place in pieces(finding, "stepped"):
        ctx = context(place.filename)
        step = statement_at(ctx, place.line) if ctx is not None else None
        owner = _stepped_optimizer(step) if step is not None else None
        if owner is None:
            continue
        found = candidate(f"reset the gradients after the step at line {place.line}", ctx, [insert_after(ctx, step, f"{owner}.zero_grad()")], finding)
        if found is not None:
            yield found
