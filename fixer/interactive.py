"""``graphfix --fix --interactive``: review the fixes hunk by hunk, as ``git add -p`` does.

Each fix is shown as a unified-diff hunk (coloured on a terminal) under its finding, and the user
answers y / n / a / d / q / ?. A file's accepted fixes are applied and checked (fixer/review.py),
then the file is written at once, atomically and only if it still holds what was read (the write
path of --fix). q writes what the file had accepted and stops; end of input is q; Ctrl-C stops
without writing the file under review (files finished before it stay written)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Sequence, TextIO

from fixer.analysis.project_files import set_root
from fixer.apply import apply_edits
from fixer.diff import display_path, unified_diff
from fixer.engine import FileResult, Options, active_rules, is_notebook, run_rules
from fixer.notebook import NotebookError, Program, cell_sources, parse_notebook, program_of, rebuild
from fixer.output import location
from fixer.review import Answer, Reviewed, Tally, review
from fixer.rule import Diagnostic
from fixer.source import Source, SourceError, WriteError, decode, encode, read_bytes, write_atomic

PROMPT = "Apply this fix [y,n,a,d,q,?]? "
HELP = """y - apply this fix
n - do not apply this fix
a - apply this fix and all later fixes in the file
d - do not apply this fix or any later fix in the file
q - quit; write the fixes accepted so far, nothing else
? - print help
"""
_COLOURS = {"header": "1", "hunk": "36", "-": "31", "+": "32", "finding": "1;33", "prompt": "1;34", "note": "2"}


class Terminal:
    """Questions on ``output`` (stderr: stdout keeps the report), answers read line by line from
    ``input``. Colour only when ``output`` is a terminal and NO_COLOR is not set."""

    def __init__(self, input: TextIO, output: TextIO, colour: Optional[bool] = None) -> None:
        self.input, self.output = input, output
        if colour is None:
            colour = output.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        self.colour = colour

    def paint(self, kind: str, text: str) -> str:
        return f"\033[{_COLOURS[kind]}m{text}\033[0m" if self.colour and text else text

    def say(self, text: str, kind: Optional[str] = None) -> None:
        self.output.write((self.paint(kind, text) if kind else text) + "\n")
        self.output.flush()

    def show_diff(self, diff: str) -> None:
        """A unified diff: the lines before the first @@ are headers."""
        header = True
        for line in diff.splitlines():
            header = header and not line.startswith("@@")
            kind = "header" if header else "hunk" if line.startswith("@@") else line[:1] if line[:1] in "+-" else None
            self.say(line, kind)

    def ask(self, counter: str) -> Answer:
        """Read answers until one is valid; end of input is q."""
        while True:
            self.output.write(self.paint("prompt", f"{counter} {PROMPT}"))
            self.output.flush()
            line = self.input.readline()
            if not line:
                self.say("")
                return Answer.QUIT
            key = line.strip().lower()[:1]
            if key and key in "ynadq":
                return Answer(key)
            if key:  # '?' and anything unknown: the help, as git does
                self.output.write(self.paint("note", HELP))


class Document:
    """A Python file: the text rules see (with a final line break) and how to show and save it."""

    def __init__(self, path: str, source: Source) -> None:
        self.path, self.source = path, source
        text = source.text
        self.padded = text and not text.endswith(("\n", "\r"))
        self.text = text + source.newline if self.padded else text
        self.newline = source.newline

    def located(self, text: str, d: Diagnostic) -> Diagnostic:
        return d

    def hunk(self, before: str, after: str) -> str:
        diff = unified_diff(self.path, before, after)
        return diff[diff.index("\n@@") + 1:] if "\n@@" in diff else diff

    def header(self) -> str:
        return unified_diff(self.path, "a\n", "b\n").split("@@")[0]  # diff --git, ---, +++

    def saved(self, text: str) -> tuple[str, list[tuple[int, str, str]]]:
        """The file's new text, and (for notebooks) its changed cells."""
        return (text[: -len(self.newline)] if self.padded and text.endswith(self.newline) else text), []


class NotebookDocument(Document):
    """A notebook: its code cells as one program (fixer.notebook); hunks are shown per cell."""

    def __init__(self, path: str, source: Source) -> None:
        self.path, self.source = path, source
        self.notebook = parse_notebook(source.text)
        self.program: Program = program_of(self.notebook)
        self.text, self.newline, self.padded = self.program.text, self.program.newline, False

    def located(self, text: str, d: Diagnostic) -> Diagnostic:
        return self.program.reread(text).diagnostic(d)

    def hunk(self, before: str, after: str) -> str:
        try:
            old, new = (cell_sources(self.notebook, self.program.reread(t)) for t in (before, after))
        except NotebookError as exc:
            return f"(cannot show this fix: {exc})\n"
        return "".join(unified_diff(self.path, old[n], new[n], n) for n in sorted(old) if old[n] != new.get(n))

    def header(self) -> str:
        return ""  # each cell's diff names the notebook and the cell

    def saved(self, text: str) -> tuple[str, list[tuple[int, str, str]]]:
        return rebuild(self.notebook, self.program.reread(text))


def usage_problem(fix: bool, diff: bool, reads_stdin: bool, silent: bool) -> Optional[str]:
    """Why --interactive cannot be used with these options (None: it can)."""
    if not fix or diff:
        return "--interactive reviews the fixes of --fix: give --fix (not --diff)"
    if reads_stdin:
        return "--interactive cannot review a buffer read from stdin ('-'): it asks its questions there"
    if silent:
        return "--interactive asks on the terminal: it cannot be --silent"
    if not sys.stdin.isatty():
        return "--interactive needs a terminal on stdin to read the answers from"
    return None


@dataclass
class Session:
    terminal: Terminal
    tally: Tally
    written: int = 0
    left: int = 0  # files with fixes not reviewed (after q)
    interrupted: bool = False
    saved: set[int] = field(default_factory=set)  # id() of the results _save brought up to date


def review_results(results: Sequence[FileResult], options_of: Callable[[str], Options], terminal: Terminal) -> Session:
    """Review every file the run would change, in the report's order; update their results to
    what was written. Stops at q, end of input or Ctrl-C."""
    session = Session(terminal, Tally())
    files = sorted((r for r in results if r.changed), key=lambda r: display_path(r.path))
    for index, result in enumerate(files):
        if session.tally.quit:
            session.left = len(files) - index
            break
        try:
            _review_file(result, options_of(result.path), session)
        except KeyboardInterrupt:
            session.interrupted, session.left = True, len(files) - index - result.written
            terminal.say("\ninterrupted" + ("" if result.written else ": this file was not written"), "note")
            break
    for result in files:  # what no one accepted is no change of this run; unreviewed files keep every finding
        if not result.written:
            result.original = result.fixed = None
            result.cells = []
        if id(result) not in session.saved:
            result.remaining = result.diagnostics
    tally = session.tally
    tail = f", {tally.refused} refused by the checks" if tally.refused else ""
    tail += f"; {session.written} file(s) written"
    tail += f"; {session.left} file(s) with fixes not reviewed" if session.left else ""
    tail += "; interrupted" if session.interrupted else ""
    terminal.say(f"graphfix: {tally.accepted} fix(es) accepted, {tally.skipped} skipped{tail}")
    return session


def _review_file(result: FileResult, options: Options, session: Session) -> None:
    terminal = session.terminal
    set_root(options.root)
    try:
        data = read_bytes(result.path)
        source = decode(data)
        doc = NotebookDocument(result.path, source) if is_notebook(result.path) else Document(result.path, source)
        rules = active_rules(doc.text.encode("utf-8", "surrogatepass"), options.rules, result.path)
        findings, crashes = run_rules(result.path, doc.text, rules, doc.newline, options.verbose, options.root)
    except (SourceError, SyntaxError, ValueError, RecursionError, MemoryError) as exc:  # changed since the run read it
        terminal.say(f"{display_path(result.path)}: cannot review: {exc}; not written", "note")
        return
    if crashes:
        return  # the run reported them already
    if doc.header():
        terminal.show_diff(doc.header())

    def ask(d: Diagnostic, text: str, number: int, total: int) -> Answer:
        terminal.say(f"{location(result.path, doc.located(text, d))}: {d.code} {d.message}", "finding")
        if d.fix.applicability.value == "unsafe":
            terminal.say("unsafe fix: it may change gradients (see the rule's Fix safety)", "note")
        terminal.show_diff(doc.hunk(text, apply_edits(text, d.fix.edits)))
        return terminal.ask(f"({number}/{total})")

    outcome = review(result.path, doc.text, findings, options, doc.newline, rules, ask, session.tally,
                     lambda message: terminal.say(message, "note"))
    with _signals_held():  # a Ctrl-C during the write counts after it: the result says what the file holds
        _save(result, doc, data, outcome, session)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    held = {signal.SIGINT} if hasattr(signal, "pthread_sigmask") else set()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held) if held else None
    try:
        yield
    finally:
        if held:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _save(result: FileResult, doc: Document, data: bytes, outcome: Reviewed, session: Session) -> None:
    """Write the accepted fixes, if any; the result says what the file now holds."""
    session.saved.add(id(result))
    result.remaining = [doc.located(outcome.text, d) for d in outcome.findings]
    if outcome.problems:
        result.errors.extend(outcome.problems)
        result.internal = True  # a fix that fails its checks is our bug, as with --fix
    if outcome.text == doc.text:
        return
    try:
        text, cells = doc.saved(outcome.text)
        result.written = write_atomic(result.path, encode(doc.source, text), expected=data)
    except (NotebookError, UnicodeEncodeError, WriteError) as exc:
        result.errors.append(str(exc) if not isinstance(exc, UnicodeEncodeError) else f"cannot write: {exc}")
        result.remaining = result.diagnostics
        return
    if result.written:
        result.original, result.fixed, result.cells = doc.source.text, text, cells
        session.written += 1
