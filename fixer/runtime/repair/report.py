"""What ``graphfix run --fix`` says once the repair ends: each candidate tried and why the re-run
refused it, then the repair kept (with the re-run's figures) or, for each finding left, what to
change by hand."""

from __future__ import annotations

from typing import Optional

from fixer.diff import display_path
from fixer.runtime.launcher import Outcome
from fixer.runtime.repair.trial import Repair, key
from fixer.runtime.static_fix import Proposal, advice


def _figures(steps: int, iterations: int) -> str:
    return f"{steps} optimizer step(s) and {iterations} iteration(s)"


def say(result: Repair, first: Outcome, proposals: list[Proposal], max_steps: Optional[int] = None, kept: bool = True) -> list[str]:
    """``max_steps``: the user's ``--max-steps`` (a trial's own limit is said as such); ``kept``:
    False for ``--diff`` (the repair is shown, not written)."""
    lines = []
    for tried in result.tried:
        f = tried.finding
        outcome = "proven by the re-run" if tried.why is None else f"refused: {tried.why}"
        lines.append(f"{display_path(f.filename)}:{f.line}: {f.code}: tried {tried.title}: {outcome}")
    if result.kept and result.last is not None:
        last = result.last
        files = ", ".join(display_path(p) for p in result.files)
        codes = ", ".join(sorted({t.finding.code for t in result.tried if t.why is None}))
        users = " (stopped by --max-steps)" if last.stopped and max_steps is not None else ""
        ours = f" (the re-run stopped after {last.steps} step(s), past the first run's failure)" if last.stopped and max_steps is None else ""
        before = "failed after" if first.exit_code != 0 and not first.stopped else "reached"
        lines.append(
            f"{'fixed' if kept else 'would fix'} {files} ({codes}): verified by a re-run: no error, {_figures(last.steps, last.iterations)}{users}; "
            f"the first run {before} {_figures(first.steps, first.iterations)}{ours}"
        )
        return lines
    words = {key(f): a for p in proposals for f, a in zip(p.answered, p.advice)}  # (outside the project)
    for finding in result.left:
        refused = [t for t in result.tried if key(t.finding) == key(finding) and t.why]
        if not refused:
            lines.append(words.get(key(finding)) or next((a for p in proposals for a in p.advice if f":{finding.line}: {finding.code}" in a), advice(finding)))
            continue
        last = refused[0]  # (the expert's first choice: its re-run says most)
        tail = f"\nthe re-run's last output:\n{last.output.rstrip()}" if last.output.strip() else ""
        lines.append(
            f"not fixed {display_path(finding.filename)} ({finding.code}): the fix is not kept, the files are as they were: "
            f"{last.why}{tail}"
        )
    return lines
