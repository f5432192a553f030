"""parse once -> run rules -> apply fixes -> verify (re-parse, fixpoint) -> result.

The engine knows no rule by name. A file whose fixed text does not parse or does not converge is
left untouched and reported as an error."""

from __future__ import annotations

import ast
import traceback
import warnings
from typing import Callable, Optional, Sequence

from fixer import depends
from fixer.apply import apply_edits, select_fixes
from fixer.context import FileContext
from fixer.deep import call_with_deep_stack
from fixer.notebook import NotebookError, Program, build_program, parse_notebook, rebuild
from fixer.results import FileResult, Options  # noqa: F401  (re-exported: the engine's types)
from fixer.rule import Diagnostic, Rule
from fixer.source import Source, SourceError, WriteError, decode, encode, write_atomic
from fixer.suppress import find_suppressions, suppressions_of

MAX_PASSES = 6


class RuleCrash(Exception):
    pass


def run_rules(path: str, text: str, rules: Sequence[type[Rule]], newline: str, verbose: bool) -> tuple[list[Diagnostic], list[str]]:
    """All diagnostics of ``rules`` on ``text`` (minus suppressed ones) and any rule crashes.
    Raises SyntaxError if ``text`` does not parse."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(text, filename=path)
    ctx = FileContext(path, text, tree, newline)
    suppressions = suppressions_of(ctx)
    found: list[Diagnostic] = []
    crashes: list[str] = []
    for rule in rules:
        try:
            try:
                diagnostics = _check(rule, ctx)
            except RecursionError:  # deeply nested code CPython accepts: analyse it on a deep stack
                diagnostics = call_with_deep_stack(_check, rule, ctx)
            found.extend(
                d for d in diagnostics if not suppressions.suppresses(d.code, d.line, d.end_line)
            )
        except Exception as exc:  # a rule bug must never stop the run
            detail = traceback.format_exc() if verbose else f"{type(exc).__name__}: {exc}"
            crashes.append(f"rule {rule.code} ({rule.name}) crashed: {detail}")
    return sorted(set(found), key=lambda d: d.sort_key), crashes


def _check(rule: type[Rule], ctx: FileContext) -> list[Diagnostic]:
    return list(rule().check(ctx))


def fix_text(
    path: str, text: str, diagnostics: list[Diagnostic], options: Options, newline: str, rules: Sequence[type[Rule]]
) -> tuple[str, list[Diagnostic], list[str]]:
    """Apply fixes pass after pass until none is left. Returns (text, remaining diagnostics, errors);
    on any failure the original text is returned with the error. The passes run the ``rules`` the
    first run ran (those the original passed the pre-filter for): a fix never brings in a rule the
    report did not run."""
    current, remaining = text, diagnostics
    for _ in range(MAX_PASSES):
        chosen = select_fixes(remaining, options.unsafe)
        if not chosen:
            return current, remaining, []
        codes = ", ".join(sorted({d.code for d in chosen}))
        try:
            new = apply_edits(current, [edit for d in chosen for edit in d.fix.edits])
        except ValueError as exc:  # a rule's fix with edits that collide: never guess an order
            return text, diagnostics, [f"fix by {codes} is inconsistent ({exc}); file left unchanged"]
        try:
            remaining, crashes = run_rules(path, new, rules, newline, options.verbose)
        except SyntaxError as exc:
            return text, diagnostics, [f"fix by {codes} produced invalid code ({exc.msg}, line {exc.lineno}); file left unchanged"]
        if crashes:
            return text, diagnostics, crashes
        if new == current:
            return current, remaining, [f"fix by {codes} made no change; file left unchanged"]
        current = new
    return text, diagnostics, [f"fixes did not converge after {MAX_PASSES} passes; file left unchanged"]


def active_rules(data: bytes, rules: Sequence[type[Rule]]) -> list[type[Rule]]:
    """The cheap byte-level pre-filter: only rules whose needle occurs in the file run."""
    answers: dict[tuple[object, bytes], bool] = {}  # rules sharing a pre-filter search once
    chosen = []
    for rule in rules:
        key = (rule.applies_to.__func__, rule.prefilter.pattern)
        if key not in answers:
            answers[key] = rule.applies_to(data)
        if answers[key]:
            chosen.append(rule)
    return chosen


WIDE_BOMS = (b"\xff\xfe", b"\xfe\xff")  # UTF-16 and UTF-32 byte-order marks


def refusal(data: bytes, rules: Sequence[type[Rule]], options: Options) -> Optional[str]:
    """Why a file is not analysed although it may hold a finding (None: analyse it)."""
    if not rules:
        if data.startswith(WIDE_BOMS):  # the byte pre-filter cannot see through UTF-16
            return "cannot decode: UTF-16/UTF-32 text; Python source must be in an ASCII-compatible encoding"
        return None
    if len(data) > options.max_file_size:
        return f"too large to analyse ({_megabytes(len(data))} > max-file-size {_megabytes(options.max_file_size)}); skipped"
    return None


def _megabytes(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MB" if size >= 1024 * 1024 else f"{size / 1024:.1f} KB"


def is_notebook(path: str) -> bool:
    return path.lower().endswith(".ipynb")


def process_source(path: str, data: bytes, options: Options, source: Optional[Source] = None) -> FileResult:
    """Analyse (and fix) one file's bytes: Python source, or a notebook's JSON by its name."""
    if is_notebook(path):
        return _process_notebook(path, data, options, source)
    return _process_python(path, data, options, source)


def _process_python(
    path: str, data: bytes, options: Options, source: Optional[Source] = None, where: Callable[[int], str] = "line {}".format
) -> FileResult:
    result = FileResult(path)
    rules = active_rules(data, options.rules)
    refused = refusal(data, rules, options)
    if refused:
        result.errors.append(refused)
    if refused or not rules:
        return result
    try:
        source = source or decode(data)
    except SourceError as exc:
        result.errors.append(str(exc))
        return result
    # Fixes move and delete whole lines, so a last line without its line break would lose or gain
    # one: rules see the text with a final line break, which the result gives back.
    text = source.text
    padded = text + source.newline if text and not text.endswith(("\n", "\r")) else text
    try:
        diagnostics, crashes = run_rules(path, padded, rules, source.newline, options.verbose)
    except SyntaxError as exc:
        result.errors.append(f"cannot parse: {exc.msg} ({where(exc.lineno or 1)})")
        return result
    except (ValueError, RecursionError, MemoryError) as exc:
        why = str(exc) or "expression nested too deeply for Python's parser"  # MemoryError has no text
        result.errors.append(f"cannot parse: {type(exc).__name__}: {why}")
        return result
    result.parsed = True
    result.diagnostics = result.remaining = diagnostics
    result.warnings = find_suppressions(padded).warnings
    result.errors.extend(crashes)
    result.internal = bool(crashes)
    if crashes or not options.fix or not any(d.fix for d in diagnostics):
        return result
    fixed, remaining, errors = fix_text(path, padded, diagnostics, options, source.newline, rules)
    if padded is not text and fixed.endswith(source.newline):
        fixed = fixed[: -len(source.newline)]
    result.errors.extend(errors)
    result.internal = bool(errors)  # a fix that breaks the code or does not converge is our bug
    result.remaining = remaining
    if fixed != text:
        result.original, result.fixed = text, fixed
    return result


def _process_notebook(path: str, data: bytes, options: Options, source: Optional[Source]) -> FileResult:
    """The code cells as one program (fixer.notebook): findings located by cell, fixes written
    back into the cells' sources only."""
    try:
        source = source or decode(data)
        notebook = parse_notebook(source.text)
    except SourceError as exc:
        return FileResult(path, errors=[str(exc)])
    if not notebook.is_python:
        return FileResult(path)  # another kernel's language: nothing to analyse
    program = build_program(notebook)
    code = Source(program.text, "utf-8", program.newline)
    inner = _process_python(path, program.text.encode("utf-8"), options, code, program.where)
    result = FileResult(path, errors=inner.errors, parsed=inner.parsed)
    result.diagnostics = [program.diagnostic(d) for d in inner.diagnostics]
    result.remaining = [program.diagnostic(d) for d in inner.remaining]
    if inner.fixed is not None:
        try:
            fixed: Program = program.reread(inner.fixed)
            text, result.cells = rebuild(notebook, fixed)
        except NotebookError as exc:
            result.errors.append(str(exc))
            result.remaining = result.diagnostics
            return result
        result.remaining = [fixed.diagnostic(d) for d in inner.remaining]
        if text != source.text:
            result.original, result.fixed = source.text, text
    return result


def process_file(path: str, options: Options) -> FileResult:
    try:
        data = depends.read(path)  # the cache's record: the result depends on these bytes
        if not is_notebook(path):  # a notebook's pre-filter and size limit apply to its code
            rules = active_rules(data, options.rules)
            if not rules or refusal(data, rules, options):
                return process_source(path, data, options)  # nothing to analyse, or why not
        source = decode(data)
    except SourceError as exc:
        return FileResult(path, errors=[str(exc)])
    result = process_source(path, data, options, source)
    if options.write and result.changed:
        _write(path, data, source, result)
    return result


def _write(path: str, data: bytes, source: Source, result: FileResult) -> None:
    """Write the fixed text. A fix that is not written is no change of this run; if the write
    failed, the file keeps its original text and so its original findings."""
    try:
        result.written = write_atomic(path, encode(source, result.fixed), expected=data)
    except (UnicodeEncodeError, WriteError) as exc:
        result.errors.append(str(exc) if isinstance(exc, WriteError) else f"cannot write: {exc}")
        result.remaining = result.diagnostics
    if not result.written:  # failed, or already fixed by someone else (e.g. a concurrent run)
        result.original = result.fixed = None
