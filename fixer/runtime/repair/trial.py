"""Trying the candidate repairs: each is written, the program run again (a fresh interpreter,
the same arguments), and kept only if the re-run proves it; otherwise the files are put back
and the next candidate is tried, in the expert's order (fixer.runtime.repair.expert).

What proves a candidate for one finding: the re-run no longer reports it (same rule, file and
line), ends cleanly or with a new finding of its own, reaches at least as many optimizer steps
and iterations, sees no NaN or infinite gradient, and every parameter that got a gradient in
the first run (from a loss of its own iteration, fixer.runtime.gradients) still gets one at its
optimizer's latest steps, and one that no module holds is still reached at the latest steps of
its optimizer in the re-run (a detach that cuts a generator or an encoder off the loss is
refused, measured). A cut (``.detach()``, ``.item()``, ``torch.no_grad()``) must also pass its
probe: the original program run with the cut value marked, no backward may send through it a
gradient that an optimizer then steps with (fixer.runtime.repair.cuts, fixer.runtime.flows):
detaching the critic's score in the generator's loss is refused although the generator keeps
its pixel gradient; detaching the fake for the critic's step is not, where the generator's
gradients are reset before its own step. A new finding is the next round's
work (a second cache filled like the first); when the last round leaves none the repair is
done, otherwise every file is put back. A raising finding is re-run only a little past where
the first run failed (``--max-steps``: its steps + 2); one found while the program runs is
re-run to the end (or the user's ``--max-steps``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Optional

from fixer.runtime.launcher import Outcome
from fixer.runtime.repair.candidate import Candidate
from fixer.runtime.repair.cuts import cut_verdict, reused_from_before
from fixer.runtime.repair.expert import candidates
from fixer.runtime.report import Finding
from fixer.runtime.static_fix import Proposal
from fixer.runtime.verify import Rerun, Summary, put_back, write_proposals
from fixer.diff import unified_diff
from fixer.source import WriteError, decode, read_bytes

ROUNDS = 6  # findings repaired one after another in one --fix, at most
PAST_FAILURE = 2  # optimizer steps a raising finding's trial runs past the first run's


@dataclass
class Tried:
    finding: Finding
    title: str
    why: Optional[str]  # None: kept
    output: str = ""  # the tail of a refused re-run's output


@dataclass
class Repair:
    kept: bool
    tried: list[Tried] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # the files written (and kept)
    last: Optional[Summary] = None  # the last kept candidate's re-run
    left: list[Finding] = field(default_factory=list)  # findings no candidate repaired
    error: str = ""  # a file could not be written
    diffs: list[str] = field(default_factory=list)  # the kept repair, as unified diffs


def key(finding: Finding) -> tuple[str, str, int]:
    return finding.code, os.path.abspath(finding.filename), finding.line


def judge(first: Outcome, second: Summary, finding: Finding) -> Optional[str]:
    """None when the re-run proves the repair of ``finding``, else what it lacked."""
    if second.timed_out is not None:
        return f"the re-run did not end within {second.timed_out:g} s"
    found = second.reported()
    if any(key(f) == key(finding) for f in found):
        return "the re-run still reports it"
    if second.exit_code != 0 and not second.stopped and not found:
        return f"the re-run ended with exit code {second.exit_code}"
    if second.nonfinite:
        return "the re-run's gradients hold NaN or infinite values"
    if second.steps < first.steps or second.iterations < first.iterations:
        return f"the re-run reached {second.steps} step(s) and {second.iterations} iteration(s), fewer than the first run"
    # lost: graded lately in the first run but not in the re-run, or never graded in the re-run (a
    # parameter whose gradient vanished late in both runs, a saturated clamp, is not a loss)
    late_gap = set(first.graded_lately) | (set(first.graded) - set(second.graded))
    trained = (set(first.graded) & set(first.direct) & late_gap) - set(second.graded_lately)
    if not first.steps:  # failed before its first step: the parameters its backward reached are all it shows trained
        trained |= set(first.direct) - set(second.direct)
    lost = sorted(trained | (set(first.orphans) - set(second.direct)))
    if lost:
        return f"{len(lost)} parameter(s) trained by the first run get no gradient now ({', '.join(lost[:3])})"
    return None


def trial_steps(first: Outcome, finding: Finding, max_steps: Optional[int]) -> Optional[int]:
    """The re-run's ``--max-steps``: the user's, or a little past a raising finding's failure."""
    if max_steps is not None or not finding.error:
        return max_steps
    return first.steps + PAST_FAILURE


def repair(
    first: Outcome, static: list[Proposal], rerun_with: Callable[[Optional[int]], Rerun], max_steps: Optional[int],
    allowed: Callable[[str], bool], keep: bool = True,
) -> Repair:
    """Repair ``first``'s findings one after another (the static rules' proposals are the first
    candidate); ``allowed(path)``: whether a file may be written (inside the program's project).
    ``keep``: False for ``--diff``, the proven repair's diffs are kept and its files put back."""
    result, written = Repair(False), []
    todo, static_left = list(first.findings), [p for p in static if p.fixed is not None]
    try:
        for _ in range(ROUNDS):
            if not todo:
                break
            finding = todo[0]
            options = ([Candidate("the static rule's fix", static_left)] if static_left else []) + candidates(finding)
            static_left = []
            options = [c for c in options if all(allowed(p.filename) for p in c.proposals)]
            rerun = rerun_with(trial_steps(first, finding, max_steps))
            second = _first_proven(options, first, finding, rerun, result, written)
            if second is None:
                result.left = todo
                break
            result.last = second
            todo = second.reported()
        else:
            result.left = todo
        result.kept = bool(written) and not result.left and not result.error
        result.files = sorted({path for path, _, _ in written})
        if result.kept:
            result.diffs = _diffs(written)
        return result
    finally:
        if not result.kept or not keep:
            put_back(written)


def _diffs(written: list[tuple[str, bytes, bytes]]) -> list[str]:
    """Each written file against its text before the repair."""
    firsts: dict[str, bytes] = {}
    for path, original, _ in written:
        firsts.setdefault(path, original)
    return [unified_diff(path, decode(original).text, decode(read_bytes(path)).text) for path, original in firsts.items()]


def _probed(option: Candidate, first: Outcome, second: Summary, rerun: Rerun, finding: Finding) -> Optional[str]:
    """The cut's probe run (the original program, the cut value marked): None when no gradient
    that an optimizer steps flows through the cut value (fixer.runtime.repair.cuts)."""
    marks: list = []
    try:
        write_proposals(option.probe, marks)
        probe = rerun()
    except (WriteError, UnicodeEncodeError, OSError) as exc:
        return f"cannot write its probe: {exc}"
    finally:
        put_back(marks)
    return cut_verdict(first.used, probe, second.used, reused_from_before(finding))


def _first_proven(options: list[Candidate], first: Outcome, finding: Finding, rerun: Rerun, result: Repair, written: list) -> Optional[Summary]:
    for option in options:
        mine: list = []
        try:
            write_proposals(option.proposals, mine)
        except (WriteError, UnicodeEncodeError, OSError) as exc:
            put_back(mine)
            result.tried.append(Tried(finding, option.title, f"cannot write it: {exc}"))
            continue
        try:
            second = rerun()
        except BaseException:  # interrupted: this candidate's files go back too
            put_back(mine)
            raise
        why = judge(first, second, finding)
        if why is None and option.probe is not None:
            put_back(mine)
            why = _probed(option, first, second, rerun, finding)
            if why is None:
                write_proposals(option.proposals, mine)
        result.tried.append(Tried(finding, option.title, why, second.output if why else ""))
        if why is None:
            written.extend(mine)
            return second
        put_back(mine)
        if second.timed_out is not None:
            break  # the program outlasts the limit: so would every other candidate
    return None
