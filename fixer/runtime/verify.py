"""``graphfix run --fix``: write the fix, run the program again, keep the fix only if that run proves it.

What is compared. The first run counts, up to its failure, the optimizer steps that completed
and the training iterations it began (a backward or step line that runs again begins the next
one; the iteration that failed counts). The re-run runs the fixed program in a fresh interpreter
with the same arguments and ``--max-steps``; it proves the fix when it reports no finding, ends
cleanly (exit 0, or stopped by ``--max-steps``), and reaches at least as many optimizer steps and
iterations as the first run (with ``--max-steps N`` and a first run that failed earlier, it
reaches N steps). Iterations, not backward calls, because a fix may merge two backward calls
into one (GF105) or drop a repeated one (GF106). Otherwise every file written is put back as it
was (an atomic write of the original bytes) and the run says why."""

from __future__ import annotations

import json
import signal
from dataclasses import asdict, dataclass
from typing import Callable, Optional

from fixer.runtime.launcher import Outcome
from fixer.runtime.report import Finding, Piece
from fixer.runtime.static_fix import Proposal
from fixer.source import WriteError, decode, encode, read_bytes, write_atomic


@dataclass(frozen=True)
class Summary:
    """What a run reached: the figures the verification compares."""

    exit_code: int
    findings: int
    steps: int
    iterations: int
    stopped: bool
    output: str = ""  # the tail of the re-run's stdout and stderr
    timed_out: Optional[float] = None  # the time limit (s) that killed the re-run
    found: tuple = ()  # the findings, as dicts (``Finding`` fields, ``evidence`` a list of ``Piece`` fields)
    graded: tuple = ()  # parameters that got a gradient at some step (fixer.runtime.gradients)
    graded_lately: tuple = ()  # ... at the latest steps of each optimizer
    nonfinite: bool = False  # a step saw a NaN or infinite gradient
    direct: tuple = ()  # parameters a loss reached through its own iteration (fixer.runtime.gradients)
    used: tuple = ()  # (backward line, parameters an optimizer stepped with its gradient) (fixer.runtime.flows)
    through: tuple = ()  # (backward line, parameters it reached through a probe's marked value)
    beside: tuple = ()  # (backward line, parameters it reached other than through the marked value)

    @staticmethod
    def of(outcome: Outcome) -> "Summary":
        return Summary(
            outcome.exit_code, len(outcome.findings), outcome.steps, outcome.iterations, outcome.stopped,
            found=tuple(asdict(f) for f in outcome.findings), graded=tuple(sorted(outcome.graded)),
            graded_lately=tuple(sorted(outcome.graded_lately)), nonfinite=outcome.nonfinite,
            direct=tuple(sorted(outcome.direct)), used=_pairs(outcome.used), through=_pairs(outcome.through),
            beside=_pairs(outcome.beside),
        )

    def reported(self) -> list[Finding]:
        """The re-run's findings, as the first run's are."""
        return [Finding(**{**f, "evidence": tuple(Piece(**p) for p in f["evidence"])}) for f in self.found]


Rerun = Callable[[], Summary]


def _pairs(by_site: dict) -> tuple:
    return tuple((site, tuple(sorted(names))) for site, names in sorted(by_site.items()))


def write_summary(path: str, outcome: Outcome) -> None:
    """The re-run's half: its figures for the run that started it (``--summary FILE``)."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(asdict(Summary.of(outcome)), handle)


def why_not_proven(first: Outcome, second: Summary) -> Optional[str]:
    """None when the re-run proves the fix, else what it lacked."""
    if second.timed_out is not None:
        return (
            f"the re-run did not end within {second.timed_out:g} s (an endless loop needs --max-steps N; "
            "a long one, --rerun-timeout SECONDS)"
        )
    if second.findings:
        return f"the re-run still reports {second.findings} finding(s)"
    if second.exit_code != 0 and not second.stopped:
        return f"the re-run ended with exit code {second.exit_code}"
    if second.steps < first.steps or second.iterations < first.iterations:
        return (
            f"the re-run reached {_figures(second.steps, second.iterations)}, fewer than the first run's "
            f"{_figures(first.steps, first.iterations)}"
        )
    return None


def _figures(steps: int, iterations: int) -> str:
    return f"{steps} optimizer step(s) and {iterations} iteration(s)"


def apply_and_verify(proposals: list[Proposal], first: Outcome, rerun: Rerun) -> tuple[bool, str]:
    """Write every proposed fix, re-run, and keep them only if the re-run proves them.
    Returns (kept, what happened, in one sentence). On any failure or interruption (Ctrl-C,
    SIGTERM raised as one) every file written is put back before the exception goes on."""
    written: list[tuple[str, bytes, bytes]] = []  # (path, original bytes, fixed bytes)
    kept = False
    try:
        try:
            write_proposals(proposals, written)
        except (WriteError, UnicodeEncodeError, OSError) as exc:
            return False, f"cannot write the fix: {exc}{_put_back(written)}"
        if not written:
            return False, "no fix to verify"
        second = rerun()
        why = why_not_proven(first, second)
        if why is None:
            kept = True
            stopped = " (stopped by --max-steps)" if second.stopped else ""
            return True, (
                f"verified by a re-run: no error, {_figures(second.steps, second.iterations)}{stopped}; "
                f"the first run failed after {_figures(first.steps, first.iterations)}"
            )
        tail = f"\nthe re-run's last output:\n{second.output.rstrip()}" if second.output.strip() else ""
        return False, f"the fix is not kept, the files are as they were: {why}{_put_back(written)}{tail}"
    finally:
        if not kept:
            _put_back(written)


def write_proposals(proposals: list[Proposal], written: list[tuple[str, bytes, bytes]]) -> None:
    """Write each proposal's fixed text, appending (path, original bytes, fixed bytes) to
    ``written`` as it goes; raises WriteError when a file changed since it was read."""
    for proposal in proposals:
        if proposal.fixed is None:
            continue
        data = read_bytes(proposal.filename)
        source = decode(data)
        if source.text != proposal.original:
            raise WriteError("changed since it ran; not written")
        fixed = encode(source, proposal.fixed)
        if write_atomic(proposal.filename, fixed, expected=data):
            written.append((proposal.filename, data, fixed))


def put_back(written: list[tuple[str, bytes, bytes]]) -> str:
    return _put_back(written)


def _put_back(written: list[tuple[str, bytes, bytes]]) -> str:
    """Each file written back to its original bytes (once: the list is emptied), with Ctrl-C
    and SIGTERM held until it is done. A file changed by someone else since the fix was written
    keeps that change: the words say which."""
    blocked = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    left = []
    try:
        while written:
            path, original, fixed = written.pop()
            try:
                write_atomic(path, original, expected=fixed)
            except (WriteError, OSError) as exc:
                left.append(f"{path}: {exc}")
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
    return f" (not put back: {'; '.join(left)})" if left else ""
