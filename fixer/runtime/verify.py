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
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from typing import Callable, Optional

from fixer.runtime.launcher import Outcome
from fixer.runtime.static_fix import Proposal
from fixer.source import WriteError, decode, encode, read_bytes, write_atomic

OUTPUT_TAIL = 2000  # characters of the re-run's output shown when it fails


@dataclass(frozen=True)
class Summary:
    """What a run reached: the figures the verification compares."""

    exit_code: int
    findings: int
    steps: int
    iterations: int
    stopped: bool
    output: str = ""  # the tail of the re-run's stdout and stderr

    @staticmethod
    def of(outcome: Outcome) -> "Summary":
        return Summary(outcome.exit_code, len(outcome.findings), outcome.steps, outcome.iterations, outcome.stopped)


Rerun = Callable[[], Summary]


def write_summary(path: str, outcome: Outcome) -> None:
    """The re-run's half: its figures for the run that started it (``--summary FILE``)."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(asdict(Summary.of(outcome)), handle)


def subprocess_rerun(target: str, args: list[str], module: bool, max_steps: Optional[int]) -> Rerun:
    """Run ``graphfix run`` again in a fresh interpreter (the fixed modules are imported anew)."""

    def rerun() -> Summary:
        import fixer

        handle, summary = tempfile.mkstemp(prefix="graphfix-run-", suffix=".json")
        os.close(handle)
        command = [sys.executable, "-m", "fixer", "run", "--summary", summary]
        command += ["--max-steps", str(max_steps)] if max_steps is not None else []
        command += ["-m", target, *args] if module else [target, *args]
        ours = os.path.dirname(os.path.dirname(os.path.abspath(fixer.__file__)))  # this graphfix, not another
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (ours, os.environ.get("PYTHONPATH")) if p)}
        try:
            done = subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace")
            output = (done.stdout + done.stderr)[-OUTPUT_TAIL:]
            try:
                with open(summary, encoding="utf-8") as file:
                    return Summary(**{**json.load(file), "output": output})
            except (OSError, ValueError, TypeError):  # it died before writing its figures
                return Summary(done.returncode or 1, 0, 0, 0, False, output)
        finally:
            os.unlink(summary)

    return rerun


def why_not_proven(first: Outcome, second: Summary) -> Optional[str]:
    """None when the re-run proves the fix, else what it lacked."""
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
    Returns (kept, what happened, in one sentence)."""
    written: list[tuple[str, bytes]] = []  # (path, original bytes)
    try:
        for proposal in proposals:
            if proposal.fixed is None:
                continue
            data = read_bytes(proposal.filename)
            source = decode(data)
            if source.text != proposal.original:
                raise WriteError("changed since it ran; not written")
            if write_atomic(proposal.filename, encode(source, proposal.fixed), expected=data):
                written.append((proposal.filename, data))
    except (WriteError, UnicodeEncodeError, OSError) as exc:
        _roll_back(written)
        return False, f"cannot write the fix: {exc}"
    if not written:
        return False, "no fix to verify"
    second = rerun()
    why = why_not_proven(first, second)
    if why is None:
        stopped = " (stopped by --max-steps)" if second.stopped else ""
        return True, (
            f"verified by a re-run: no error, {_figures(second.steps, second.iterations)}{stopped}; "
            f"the first run failed after {_figures(first.steps, first.iterations)}"
        )
    _roll_back(written)
    tail = f"\nthe re-run's last output:\n{second.output.rstrip()}" if second.output.strip() else ""
    return False, f"the fix is not kept, the files are as they were: {why}{tail}"


def _roll_back(written: list[tuple[str, bytes]]) -> None:
    for path, original in reversed(written):
        write_atomic(path, original, expected=read_bytes(path))
