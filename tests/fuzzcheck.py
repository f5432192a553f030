"""The fuzz oracles, shared by tests/test_fuzz.py and benchmarks/fuzz.py, and a reducer.

`check(data)` runs every rule with unsafe fixes in-process, the way `graphfix --fix
--unsafe-fixes` does, and returns what went wrong, as (kind, detail) pairs:
- for any input: no exception escapes the engine, and it answers within LIMIT seconds;
- for inputs CPython compiles: no error in the result (rule crash, refused fix, non-convergence,
  "cannot parse"); the fixed text compiles; a second run changes nothing; every changed line lies
  within a snippet (first to last line carrying its marker `_mN`) in which a finding starts;
  encoding, BOM, newline style and final newline are kept; no fix brings in a finding: the engine
  refused none, and no rule finds more in the fixed text than in the original.
Lines are split only at \\r\\n, \\r and \\n, as Python does.
"""

from __future__ import annotations

import collections
import difflib
import re
import signal
import time
from contextlib import contextmanager
import warnings
from dataclasses import dataclass, field

from fixer.engine import Options, process_source
from fixer.registry import all_rules
from fixer.source import SourceError, decode, encode

OPTIONS = Options(rules=tuple(all_rules()), fix=True, unsafe=True)
KINDS = ("timeout", "uncaught exception", "rule crash", "refused fix", "non-convergence", "engine cannot parse",
         "other error", "unparsable output", "non-idempotent", "edit outside snippets", "format changed", "new finding")
BREAK = re.compile(r"\r\n|\r|\n")
MARKER = re.compile(r"_m\d+\b")
LIMIT = 10.0  # CPU seconds per engine run; the slowest healthy programs take about 5


class Timeout(BaseException):
    """Not an Exception, so the engine's per-rule `except Exception` cannot swallow it."""


@contextmanager
def time_limit(seconds: float):
    def expire(signum, frame):
        raise Timeout()

    # CPU time of this process (user + system), not wall time: a machine busy with other work
    # must not turn a healthy run into a timeout
    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def run(data: bytes):
    with time_limit(LIMIT):
        return process_source("fuzz.py", data, OPTIONS)


@dataclass
class Outcome:
    compiles: bool = False
    findings: int = 0
    fixed: bool = False
    failures: list[tuple[str, str]] = field(default_factory=list)

    def kinds(self) -> set[str]:
        return {kind for kind, _ in self.failures}


def lines(text: str) -> list[str]:
    """Lines with their ends, split where Python splits them."""
    out, start = [], 0
    for match in BREAK.finditer(text):
        out.append(text[start : match.end()])
        start = match.end()
    return out + ([text[start:]] if start < len(text) else [])


def compiles(source: bytes | str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, "fuzz.py", "exec", dont_inherit=True)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def error_kind(message: str) -> str:
    if " crashed: " in message:
        return "rule crash"
    if "produced invalid code" in message or "made no change" in message:
        return "refused fix"
    if "did not converge" in message:
        return "non-convergence"
    if message.startswith("cannot parse"):
        return "engine cannot parse"
    return "other error"


def snippet_spans(text_lines: list[str]) -> list[tuple[int, int]]:
    """0-based inclusive (first, last) line of each snippet, from its marker."""
    spans: dict[str, list[int]] = {}
    for number, line in enumerate(text_lines):
        for marker in set(MARKER.findall(line)):
            spans.setdefault(marker, []).append(number)
    return [(min(found), max(found)) for found in spans.values()]


def edits_outside(before: str, after: str, finding_lines: set[int]) -> list[str]:
    """Changed line ranges that are not inside a snippet holding a finding (0-based lines)."""
    old = lines(before)
    spans = [span for span in snippet_spans(old) if any(span[0] <= n <= span[1] for n in finding_lines)]
    bad = []
    matcher = difflib.SequenceMatcher(None, old, lines(after), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        # replaced/deleted lines i1..i2-1 inside a span; an insertion point may be one past its end
        last = i2 - 1 if i2 > i1 else i1 - 1
        if not any(first <= i1 and last <= end for first, end in spans) and not (
            i1 == i2 and any(first <= i1 <= end + 1 for first, end in spans)
        ):
            bad.append(f"line {i1 + 1}: {old[i1:i2]!r} -> {matcher.b[j1:j2]!r}")
    return bad


def more_findings(before, after) -> list[str]:
    """Rules that find more in the fixed text than in the original (an independent check of the
    engine's matching of findings across a fix)."""
    counts = collections.Counter(d.code for d in before)
    counts.subtract(d.code for d in after)
    return [f"{code}: {-n} more after fixing" for code, n in sorted(counts.items()) if n < 0]


def format_changes(data: bytes, source, fixed: str) -> list[str]:
    try:
        out = encode(source, fixed)
        again = decode(out)
    except (UnicodeError, SourceError) as exc:
        return [f"cannot encode the fixed text: {exc}"]
    problems = []
    if again.encoding != source.encoding or out.startswith(b"\xef\xbb\xbf") != data.startswith(b"\xef\xbb\xbf"):
        problems.append(f"encoding {source.encoding} -> {again.encoding}")
    if set(BREAK.findall(fixed)) - set(BREAK.findall(source.text)):
        problems.append(f"newlines {sorted(set(BREAK.findall(source.text)))} -> {sorted(set(BREAK.findall(fixed)))}")
    if source.text.endswith(("\n", "\r")) != fixed.endswith(("\n", "\r")):
        problems.append("final newline added or removed")
    return problems


def check(data: bytes) -> Outcome:
    outcome = Outcome(compiles=compiles(data))
    try:
        result = run(data)
    except Timeout:
        outcome.failures.append(("timeout", f"no result after {LIMIT:.0f} s"))
        return outcome
    except Exception as exc:  # noqa: BLE001 - that is the finding
        outcome.failures.append(("uncaught exception", f"{type(exc).__name__}: {exc}"))
        return outcome
    outcome.findings = len(result.diagnostics)
    if not outcome.compiles:
        return outcome
    outcome.failures += [(error_kind(message), message) for message in result.errors]
    outcome.failures += [("new finding", message) for message in result.refused]
    if not result.changed:
        return outcome
    outcome.fixed = True
    fixed = result.fixed
    if not compiles(fixed):
        outcome.failures.append(("unparsable output", fixed))
        return outcome
    source = decode(data)
    outcome.failures += [("format changed", problem) for problem in format_changes(data, source, fixed)]
    try:
        again = run(encode(source, fixed))
    except Timeout:
        outcome.failures.append(("timeout", f"second run: no result after {LIMIT:.0f} s"))
        return outcome
    except Exception as exc:  # noqa: BLE001
        outcome.failures.append(("uncaught exception", f"second run: {type(exc).__name__}: {exc}"))
        return outcome
    if again.changed or again.errors:
        outcome.failures.append(("non-idempotent", f"second run: errors {again.errors}, changed {again.changed}"))
    outcome.failures += [("new finding", more) for more in more_findings(result.diagnostics, again.diagnostics)]
    finding_lines = {d.line - 1 for d in result.diagnostics}
    outcome.failures += [("edit outside snippets", bad) for bad in edits_outside(source.text, fixed, finding_lines)]
    return outcome


def reduce(data: bytes, kind: str, seconds: float = 20.0) -> bytes:
    """Delta-debug ``data`` line by line to a smaller input that still fails with ``kind``.
    Lines are dropped in chunks, then one by one; the first line (a coding cookie) is kept
    whenever the input has one. Stops after about ``seconds``."""
    parts = [p for p in re.split(rb"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)", data) if p]
    head = parts.pop(0) if parts and parts[0].startswith(b"# -*- coding") else b""
    deadline = time.monotonic() + seconds

    def fails(candidate: list[bytes]) -> bool:
        return kind in check(head + b"".join(candidate)).kinds()

    chunk = max(1, len(parts) // 2)
    while chunk >= 1 and time.monotonic() < deadline:
        start, progressed = 0, False
        while start < len(parts) and time.monotonic() < deadline:
            candidate = parts[:start] + parts[start + chunk :]
            if candidate and fails(candidate):
                parts, progressed = candidate, True
            else:
                start += chunk
        if not progressed:
            chunk //= 2
    return head + b"".join(parts)
