"""The probe of a cut: the original program with the value a candidate would cut wrapped in
``fixer.runtime.flows.mark`` (a fresh view, nothing else changed), so that a run shows which
backward walked through that value and which parameters it reached there; with each backward
line's ``used`` facts (the parameters an optimizer stepped with that backward's gradient) the
trial refuses a cut that takes away a gradient the program trains with, although the same
parameters keep others (fixer.runtime.repair.trial).

A value built once before the loop and reused by every iteration (GF102) is the exception: its
graph can carry a gradient at its first use only, which the next use fails on, so that gradient
is the bug's, not one the loop trains with. Its cut is refused only for the parameters that no
fresh graph of the probe's iterations reaches beside it (an encoder trained through the value
alone); a critic that its own loss trains keeps training when the advantages built from it are
detached."""

from __future__ import annotations

import ast
import os
from typing import Optional

from fixer.context import FileContext
from fixer.edits.values import replace_edit
from fixer.rule import Edit
from fixer.runtime.flows import as_map
from fixer.runtime.report import Finding

MARK = '__import__("fixer.runtime.flows", fromlist=["mark"]).mark'


def marked(text: str) -> str:
    return f"{MARK}({text})"


def mark_edit(ctx: FileContext, expr: ast.expr) -> Edit:
    """``expr`` wrapped in the probe's mark where it stands."""
    return replace_edit(ctx, expr, marked(ctx.text(expr)))


def _line(site: str) -> str:
    path, _, line = site.rpartition(":")
    return f"{os.path.basename(path)}:{line}"


def reused_from_before(finding: Finding) -> bool:
    """The run shows the value built once, before the loop, and used again by a later iteration."""
    return finding.code == "GF102"


def cut_verdict(first_used: object, probe: object, second_used: object, reused: bool = False) -> Optional[str]:
    """None when no backward sent a gradient that an optimizer steps through the cut value;
    ``probe``: the probe run's Summary (``through``, ``used``, ``beside``); ``reused``: the value
    was built before the loop (reused_from_before)."""
    if probe is None or probe.timed_out is not None:
        return "the probe run of the cut (the original program, the cut value marked) gave no facts"
    used = [as_map(first_used), as_map(probe.used), as_map(second_used)]
    fresh = set().union(*as_map(probe.beside).values()) if reused else set()
    for site, names in sorted(as_map(probe.through).items()):
        lost = sorted(n for n in names if n not in fresh and any(n in u.get(site, ()) for u in used))
        if lost:
            return (
                f"it cuts the gradient that the backward at {_line(site)} sends through the cut value to "
                f"{len(lost)} parameter(s) an optimizer steps with it ({', '.join(lost[:3])})"
            )
    return None
