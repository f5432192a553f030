"""Repairs of the optimizer protocol (GF201, GF203): where ``zero_grad()`` runs.

- **zero_grad wipes the gradient before the step uses it** (GF201): the call moved just before
  the backward that fills the gradient (the expert's usual order: zero, backward, step), else
  just after the step;
- **nothing resets the gradient between steps** (GF203): ``OPT.zero_grad()``, for the optimizer
  the step is called on, just before the backward that accumulated again when it runs in the
  step's block (zero, backward, step: what other backwards left in between is dropped too),
  else just after the step. A step the run saw at a call (``self.update_critic(...)``) is looked
  for in the function of the same file that the call runs;
- **a premature step between two backward passes of one graph** (the run's "changed by" step,
  which made the later backward raise "modified by an inplace operation"): deleted, where the
  same optimizer steps again after that backward with no zero_grad between
  (``analysis.premature_steps``: the later step already applies both gradients)."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.premature_steps import premature_step
from fixer.edits.statements import delete_statement, insert_after, insert_before, move_edits
from fixer.nodes import walk
from fixer.runtime.fill_site import callees
from fixer.runtime.report import Finding
from fixer.runtime.repair.candidate import Candidate, candidate, context, enclosing_function, pieces, statement_at


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


def _steps(ctx, stmt: ast.stmt) -> list[tuple[ast.stmt, str]]:
    """(the step statement, its optimizer) of ``stmt`` itself, else of the functions of the file it calls."""
    owner = _stepped_optimizer(stmt)
    if owner is not None:
        return [(stmt, owner)]
    calls = [n for n in walk(stmt) if isinstance(n, ast.Call)]
    bodies = [f for call in calls for f in callees(ctx.tree, enclosing_function(ctx, stmt), call)]
    return [(n, o) for f in bodies for n in walk(f) if isinstance(n, ast.stmt) and (o := _stepped_optimizer(n)) is not None]


def zero_after_step(finding: Finding) -> Iterator[Candidate]:
    again = next(iter(pieces(finding, "accumulated again")), None)
    for place in pieces(finding, "stepped"):
        ctx = context(place.filename)
        stmt = statement_at(ctx, place.line) if ctx is not None else None
        for step, owner in _steps(ctx, stmt) if stmt is not None else []:
            backward = statement_at(ctx, again.line) if again is not None and again.filename == place.filename else None
            if backward is not None and _same_block(ctx, backward, step) and backward.lineno < step.lineno:
                edit = insert_before(ctx, backward, f"{owner}.zero_grad()")
                found = candidate(f"reset the gradients before the backward at line {again.line}", ctx, [edit], finding)
                if found is not None:
                    yield found
            found = candidate(f"reset the gradients after the step at line {step.lineno}", ctx, [insert_after(ctx, step, f"{owner}.zero_grad()")], finding)
            if found is not None:
                yield found


def drop_premature_step(finding: Finding) -> Iterator[Candidate]:
    failed = next(iter(pieces(finding, "failed", "needed by")), None)
    for change in pieces(finding, "changed by") if failed is not None and failed.filename else []:
        ctx = context(change.filename)
        if ctx is None or failed.filename != change.filename:
            continue
        step, backward = statement_at(ctx, change.line), statement_at(ctx, failed.line)
        earlier = [statement_at(ctx, p.line) for p in pieces(finding, "first backward") if p.filename == change.filename]
        later = premature_step(ctx, step, backward, [s for s in earlier if s is not None]) if step and backward else None
        if later is not None:
            title = f"delete the premature step at line {change.line}: the step at line {later.lineno} applies both backward calls' gradients"
            found = candidate(title, ctx, [e for e in [delete_statement(ctx, step)] if e is not None], finding)
            if found is not None:
                yield found
