"""Where ``graphfix run`` writes its report, and the one line that says what ran.

The program's own prints must never mix with a machine-readable report: with ``--output FILE``
the report goes to the file; a JSON report on stdout keeps stdout for itself, the program's
stdout (file descriptor 1, so C code and child processes too) going to stderr while it runs.
Whatever the format, one summary line on stderr ends every run: what was watched, how far it
went, how many findings, where they were written."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Iterator, Optional

from fixer.runtime.report import Finding, as_json, text_lines


def render(findings: list[Finding], fmt: str) -> str:
    if fmt == "json":
        return as_json(findings) + "\n"
    return "".join(line + "\n" for line in text_lines(findings))


class LineEnd:
    """Whether the program's last write to stdout left its line open (a ``\r`` progress line)."""

    unfinished = False


@contextlib.contextmanager
def line_end(stream) -> Iterator[LineEnd]:
    """Watch the writes to ``stream`` (``sys.stdout``: ``print`` and ``sys.stdout.write`` reach
    it) for how the last one ended; the stream itself is untouched otherwise."""
    seen = LineEnd()
    write = getattr(stream, "write", None)

    def tracked(text):
        if text:
            seen.unfinished = not str(text).endswith("\n")
        return write(text)

    try:
        stream.write = tracked
    except (AttributeError, TypeError):  # a stream without an instance dict: not watched
        yield seen
        return
    try:
        yield seen
    finally:
        with contextlib.suppress(AttributeError):
            del stream.write


def write_report(findings: list[Finding], fmt: str, output: Optional[str], fresh_line: bool = False) -> Optional[str]:
    """Write the report to ``output`` (None: stdout, on a line of its own when ``fresh_line``:
    the program's last output did not end its line); why it could not be written, or None."""
    text = render(findings, fmt)
    if output is None:
        if fresh_line and text:
            text = "\n" + text
        sys.stdout.write(text)
        sys.stdout.flush()
        return None
    try:
        with open(output, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        return f"--output {output}: {exc.strerror or exc}"
    return None


@contextlib.contextmanager
def stdout_to_stderr(active: bool) -> Iterator[None]:
    """While the program runs, its stdout (Python's and file descriptor 1) goes to stderr."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def summary(target: str, module: bool, outcome, output: Optional[str]) -> str:
    """``graphfix run: watched train.py: 3 iteration(s), 3 optimizer step(s); 1 finding(s) ...``"""
    what = f"-m {target}" if module else target
    found = len(outcome.findings)
    where = f" (written to {output})" if output is not None and found else ""
    ending = "stopped by --max-steps" if outcome.stopped else f"the program exited {outcome.exit_code}"
    return (
        f"graphfix run: watched {what}: {outcome.iterations} iteration(s), {outcome.steps} optimizer step(s); "
        f"{found} finding(s){where}; {ending}"
    )
