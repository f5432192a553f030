"""parse once -> run rules -> apply fixes -> verify (re-parse, fixpoint) -> result.

The engine knows no rule by name. A file whose fixed text does not parse or does not converge is
left untouched and reported as an error; a fix that would bring in a new finding is not applied
(fixer/fixcheck.py matches findings across a pass) and its finding remains."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Sequence

from fixer import depends, fixpass
from fixer.apply import apply_edits, select_fixes
from fixer.context import FileContext
from fixer.deep import call_with_deep_stack
from fixer.analysis.project_files import set_root
from fixer.analysis.project_text import STEP_CALL, imported_by_matching, imports_matching
from fixer.fixpass import Outcome, PassFailed
from fixer.literals import blanked_by_tokens, blanked_literals
from fixer.nodes import parse
from fixer.notebook import NotebookError, Program, build_program, parse_notebook, rebuild
from fixer.rule import BACKWARD_CALL, Diagnostic, Edit, Rule
from fixer.source import Source, SourceError, WriteError, decode, encode, write_atomic
from fixer.suppress import find_suppressions, suppressions_of

MAX_PASSES = 6


@dataclass(frozen=True)
class Options:
    rules: tuple[type[Rule], ...]
    fix: bool = False  # compute fixed text (for --diff and --fix)
    unsafe: bool = False
    write: bool = False  # write fixed text back (--fix on files)
    verbose: bool = False
    max_file_size: int = 8 * 1024 * 1024  # bytes; ast needs ~100-200x a file's size in memory
    root: Optional[str] = None  # the project (repository) the file belongs to: imports never resolve outside it


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)  # as found in the original text
    remaining: list[Diagnostic] = field(default_factory=list)  # after fixing (== diagnostics if not fixing)
    original: Optional[str] = None  # set when fixed differs
    fixed: Optional[str] = None
    errors: list[str] = field(default_factory=list)
    internal: bool = False  # one of the errors is a bug of ours (a rule crash, a refused fix): exit 2, not 123
    warnings: list[tuple[int, int, str]] = field(default_factory=list)  # (line, column, message): bad suppressions
    parsed: bool = False
    written: bool = False  # --fix: this run replaced the file on disk
    cells: list[tuple[int, str, str]] = field(default_factory=list)  # notebooks: (cell, before, after) changed
    seconds: float = 0.0  # time spent on this file (set by the runner)

    @property
    def changed(self) -> bool:
        return self.fixed is not None and self.fixed != self.original

    @property
    def refused(self) -> list[str]:
        """Why fixes were not applied (they would bring in a new finding); their findings remain."""
        return [d.fix_refused for d in self.remaining if d.fix_refused]


class RuleCrash(Exception):
    pass


def run_rules(
    path: str, text: str, rules: Sequence[type[Rule]], newline: str, verbose: bool, root: Optional[str] = None
) -> tuple[list[Diagnostic], list[str]]:
    """All diagnostics of ``rules`` on ``text`` (minus suppressed ones) and any rule crashes.
    Raises SyntaxError if ``text`` does not parse."""
    tree = parse(text, filename=path)
    blanked = blanked_literals(text, tree)
    if blanked is not None:  # a rule passed the pre-filter only through a string literal's text
        rules = active_rules(blanked, rules, path)
    ctx = FileContext(path, text, tree, newline, root)
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
    ctx.cache.clear()  # its analyses refer back to it: freed now, not by a later cycle collection (a pass runs several)
    return sorted(set(found), key=lambda d: d.sort_key), crashes


def _in_literals_only(text: str, rules: Sequence[type[Rule]], path: str) -> bool:
    """The rules passed the pre-filter only through string literals that the tokens place (run_rules'
    second look, made before the parse): nothing to analyse, nor to parse, as for a file whose
    matches are all on comment lines. (A fix pass still parses its text: a fix must keep it valid.)"""
    blanked = blanked_by_tokens(text)
    return blanked is not None and not active_rules(blanked, rules, path)


def _check(rule: type[Rule], ctx: FileContext) -> list[Diagnostic]:
    return list(rule().check(ctx))


def fix_text(
    path: str, text: str, diagnostics: list[Diagnostic], options: Options, newline: str, rules: Sequence[type[Rule]]
) -> tuple[str, list[Diagnostic], list[str]]:
    """Apply fixes pass after pass until none is left. Returns (text, remaining diagnostics, errors);
    on any failure the original text is returned with the error. A fix that would bring in a finding
    the text before its pass did not have is not applied: its finding remains, without a fix and
    with ``fix_refused`` saying why. The passes run the ``rules`` the first run ran
    (those the original passed the pre-filter for) and any selected rule a fix makes pass it."""
    current, remaining, rules = text, diagnostics, list(rules)
    refused: dict[Diagnostic, str] = {}  # findings of ``current`` whose fix was refused, and why
    for _ in range(MAX_PASSES):
        chosen = select_fixes([d for d in remaining if d not in refused], options.unsafe)
        if not chosen:
            kept = [replace(d, fix=None, fix_refused=refused[d]) if d in refused else d for d in remaining]
            return current, kept, []
        try:
            new, found, origins, refusals = checked_pass(path, current, remaining, chosen, options, newline, rules)
        except PassFailed as exc:
            return text, diagnostics, [str(exc)]
        if new == current and not refusals:
            codes = ", ".join(sorted({d.code for d in chosen}))
            return current, found, [f"fix by {codes} made no change; file left unchanged"]
        refused.update(refusals)
        refused = {d: refused[old] for d, old in zip(found, origins) if old in refused}
        current, remaining = new, found
    return text, diagnostics, [f"fixes did not converge after {MAX_PASSES} passes; file left unchanged"]


def checked_pass(
    path: str, current: str, before: list[Diagnostic], chosen: list[Diagnostic], options: Options, newline: str,
    rules: list[type[Rule]],
) -> Outcome:
    """Apply the ``chosen`` fixes to ``current`` (whose findings are ``before``), each kept only if it
    brings in no new finding (fixer/fixpass.py). Returns the new text, its findings, the finding of
    ``current`` each one stands for (None: new) and the fixes refused, with why."""

    def analyse(fixes: list[Diagnostic], edits: list[Edit]) -> tuple[str, list[Diagnostic]]:
        codes = ", ".join(sorted({d.code for d in fixes}))
        try:
            new = apply_edits(current, edits)
        except ValueError as exc:  # a rule's fix with edits that collide: never guess an order
            raise PassFailed(f"fix by {codes} is inconsistent ({exc}); file left unchanged")
        _activate(new, options, rules, path)
        try:
            found, crashes = run_rules(path, new, rules, newline, options.verbose, options.root)
        except SyntaxError as exc:
            raise PassFailed(f"fix by {codes} produced invalid code ({exc.msg}, line {exc.lineno}); file left unchanged")
        if crashes:
            raise PassFailed("; ".join(crashes))
        return new, found

    cleanups = {rule.code for rule in rules if rule.cleans_up}
    return fixpass.checked_pass(current, before, chosen, options.unsafe, cleanups, analyse)


def _activate(text: str, options: Options, rules: list[type[Rule]], path: str) -> None:
    """Add to ``rules`` each selected rule whose pre-filter a fix made ``text`` pass: all its findings are new."""
    others = [rule for rule in options.rules if rule not in rules]
    if others:
        rules.extend(active_rules(text.encode("utf-8", "surrogatepass"), others, path))


def active_rules(data: bytes, rules: Sequence[type[Rule]], path: str = "-") -> list[type[Rule]]:
    """The cheap byte-level pre-filter: only rules whose needle occurs in the file run, or in a
    module of the project the file imports (a training step called from another file), or in a
    file of the project that imports this one (a tracker or a model a training script uses)."""
    answers: dict[tuple[object, bytes], bool] = {}  # rules sharing a pre-filter search once
    imported: list[bool] = []  # the import test, made once for every rule that asks

    def imports_step() -> bool:
        if not imported:  # a step imported and called in a loop, or definitions a training file imports
            imported.append((b"for" in data or b"while" in data) and imports_matching(path, data, STEP_CALL)
                            or b"def" in data and imported_by_matching(path, STEP_CALL))
        return imported[0]

    chosen = []
    for rule in rules:
        key = (rule.applies_to.__func__, rule.prefilter.pattern)  # (with its literal there, a rule asks what the others do)
        if answers.get(key, True) is False or rule.also_needs not in data:
            continue  # (a shared no first: its literal is then never looked for through the whole file)
        if key not in answers:
            answers[key] = rule.applies_to(data) or (rule.prefilter is BACKWARD_CALL and imports_step())
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


def process_source(
    path: str, data: bytes, options: Options, source: Optional[Source] = None, rules: Optional[list[type[Rule]]] = None
) -> FileResult:
    """Analyse (and fix) one file's bytes: Python source, or a notebook's JSON by its name.
    ``rules``: the pre-filter's answer for ``data`` when the caller already has it."""
    set_root(options.root)  # imports resolve inside the file's project only
    if is_notebook(path):
        return _process_notebook(path, data, options, source)
    return _process_python(path, data, options, source, rules=rules)


def _process_python(
    path: str,
    data: bytes,
    options: Options,
    source: Optional[Source] = None,
    where: Callable[[int], str] = "line {}".format,
    rules: Optional[list[type[Rule]]] = None,
) -> FileResult:
    result = FileResult(path)
    if rules is None:
        rules = active_rules(data, options.rules, path)
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
        diagnostics, crashes = ([], []) if _in_literals_only(padded, rules, path) else \
            run_rules(path, padded, rules, source.newline, options.verbose, options.root)
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
    inner = _process_program(path, program, options)
    if not inner.parsed and any(e.startswith("cannot parse: ") for e in inner.errors):
        checked = build_program(notebook, skip_unparsable=True)  # fixer.notebook.program_of, parsed once
        if checked.skipped:
            program, inner = checked, _process_program(path, checked, options)
    result = FileResult(path, errors=inner.errors, parsed=inner.parsed, warnings=[(0, 0, why) for why in program.skipped])
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


def _process_program(path: str, program: Program, options: Options) -> FileResult:
    code = Source(program.text, "utf-8", program.newline)
    return _process_python(path, program.text.encode("utf-8"), options, code, program.where)


def process_file(path: str, options: Options) -> FileResult:
    set_root(options.root)
    rules = None
    try:
        data = depends.read(path)  # the result cache's record: the result depends on these bytes
        if not is_notebook(path):  # a notebook's pre-filter and size limit apply to its code
            rules = active_rules(data, options.rules, path)
            if not rules or refusal(data, rules, options):
                return process_source(path, data, options, rules=rules)  # nothing to analyse, or why not
        source = decode(data)
    except SourceError as exc:
        return FileResult(path, errors=[str(exc)])
    result = process_source(path, data, options, source, rules)
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
