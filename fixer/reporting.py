"""What a check prints when it is done: diagnostics or diffs on stdout, problems and the summary
line on stderr, and the exit code (0 clean, 1 findings or a diff, 2 our error, 123 a file error)."""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from fixer.diff import display_path, unified_diff
from fixer.engine import FileResult, is_notebook
from fixer.full_format import color_enabled
from fixer.notebook import parse_notebook
from fixer.output import render
from fixer.source import SourceError, decode, split_lines
from fixer.printable import printable

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR, EXIT_FILE_ERROR = 0, 1, 2, 123

silent = False  # --silent: nothing on stderr
color = "auto"  # --color: auto (a terminal without NO_COLOR), always, never


def err(message: str) -> None:
    if not silent:
        typer.echo(message, err=True)


def print_diagnostics(results: list[FileResult], attr: str, unsafe: bool, fmt: str, stream) -> int:
    items = sorted(
        ((r.path, d) for r in results for d in getattr(r, attr)),
        key=lambda item: (display_path(item[0]), item[1].sort_key),
    )
    errors = [(r.path, e) for r in results for e in r.errors]
    painted = fmt in ("text", "full") and color_enabled(color, stream)
    stream.write(render(fmt, items, unsafe, errors, painted, _source_lines(results, attr) if fmt == "full" else None))
    return len(items)


def _source_lines(results: list[FileResult], attr: str):
    """(path, cell) -> the lines the findings in ``attr`` count in: the fixed text for what
    remains after fixing, else the file's (a notebook's cell)."""
    texts = {r.path: (r.fixed if attr == "remaining" and r.fixed is not None else r.original) for r in results}
    cache: dict[str, object] = {}

    def lines_for(path: str, cell):
        if path not in cache:
            cache[path] = _cells(path, texts.get(path))
        found = cache[path]
        text = found.get(cell) if isinstance(found, dict) else found
        return split_lines(text) if text else None

    return lines_for


def _cells(path: str, text):
    """The file's text, or a notebook's {cell: source}; None where it cannot be read."""
    try:
        if text is None:
            with open(path, "rb") as handle:
                text = decode(handle.read()).text
        return {c.number: c.source for c in parse_notebook(text).cells} if is_notebook(path) else text
    except (OSError, SourceError):
        return None


def report(results: list[FileResult], unsafe: bool, diff: bool, fix: bool, fmt: str, quiet: bool, repos: Optional[int] = None) -> int:
    changed = [r for r in results if (r.written if fix else r.changed)]  # --fix counts only files written
    if diff:
        for result in sorted(changed, key=lambda r: display_path(r.path)):
            if result.cells:  # a notebook: one diff per changed cell
                for cell, before, after in result.cells:
                    sys.stdout.write(unified_diff(result.path, before, after, cell))
            else:
                sys.stdout.write(unified_diff(result.path, result.original, result.fixed))
        # findings whose fix is unsafe (or absent) show no diff but are still findings: a CI gate
        # on `graphfix --diff` must not pass over them
        found = len(changed) + sum(len(r.remaining) for r in results)
    else:
        found = print_diagnostics(results, "remaining" if fix else "diagnostics", unsafe, fmt, sys.stdout)
    return finish(results, fix, diff, quiet, found, repos, unsafe)


def finish(results: list[FileResult], fix: bool, diff: bool, quiet: bool, found: int, repos: Optional[int], unsafe: bool = False) -> int:
    """Flush the report, name the problems, print the summary; the exit code."""
    sys.stdout.flush()
    print_problems(results, quiet)
    if not quiet:
        changed = [r for r in results if (r.written if fix else r.changed)]
        errors = sum(len(r.errors) for r in results)
        where = f" in {repos} repositories" if repos is not None else ""
        err(summary(results, changed, unsafe, diff, fix, errors).replace(" file(s) scanned", f" file(s) scanned{where}", 1))
    return exit_code(results, found)


def print_problems(results: list[FileResult], quiet: bool) -> None:
    """Refused fixes (their findings remain: exit 1) and files that could not be checked (always),
    then malformed suppressions (unless quiet), one line each on stderr."""
    for result in results:
        for refusal in result.refused:
            err(printable(f"{display_path(result.path)}: warning: {refusal}"))
    for result in results:
        for error in result.errors:
            err(printable(f"{display_path(result.path)}: error: {error}"))
    if not quiet:
        for result in results:
            for line, col, message in result.warnings:  # line 0: the whole file (a notebook's cell)
                err(printable(f"{display_path(result.path)}{f':{line}:{col}' if line else ''}: warning: {message}"))


def exit_code(results: list[FileResult], found: int) -> int:
    if any(r.internal for r in results):
        return EXIT_ERROR
    if any(r.errors for r in results):
        return EXIT_FILE_ERROR
    return EXIT_FINDINGS if found else EXIT_CLEAN


def statistics(results: list[FileResult], fix: bool, fmt: str = "text") -> int:
    """``count  code  name`` per rule, most frequent first (for migrating many repositories); with
    ``json``, as ruff writes it: ``[{"code", "name", "count", "fixable"}]``."""
    counts: dict[tuple[str, str], int] = {}
    fixable: dict[tuple[str, str], int] = {}
    for result in results:
        for d in result.remaining if fix else result.diagnostics:
            counts[(d.code, d.name)] = counts.get((d.code, d.name), 0) + 1
            fixable[(d.code, d.name)] = fixable.get((d.code, d.name), 0) + bool(d.fix and d.fix.applicability.value == "safe")
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if fmt == "json":
        records = [{"code": code, "name": name, "count": count, "fixable": fixable[(code, name)] == count} for (code, name), count in ranked]
        typer.echo(json.dumps(records, indent=2))
    else:
        for (code, name), count in ranked:
            typer.echo(f"{count:>6}  {code}  {name}")
    print_problems(results, quiet=False)
    return exit_code(results, len(counts))


def summary(results: list[FileResult], changed: list[FileResult], unsafe_on: bool, diff: bool, fix: bool, errors: int) -> str:
    checked = sum(r.parsed for r in results)
    found = [d for r in results for d in r.diagnostics]
    tail = f"; {errors} error(s)" if errors else ""
    if fix or diff:
        verb = "fixed" if fix else "would fix"
        remaining = sum(len(r.remaining) for r in results)
        refused = sum(len(r.refused) for r in results)
        kept = f" ({refused} fix(es) refused)" if refused else ""
        return f"graphfix: {verb} {len(changed)} file(s); {remaining} finding(s) remaining{kept}; {len(results)} file(s) scanned, {checked} analysed{tail}"
    safe = sum(1 for d in found if d.fix and d.fix.applicability.value == "safe")
    unsafe = sum(1 for d in found if d.fix and d.fix.applicability.value == "unsafe")
    fixable = safe + unsafe if unsafe_on else safe  # --unsafe-fixes given: its fixes are fixable too
    hint = f" ({fixable} fixable with --fix" + (f", {unsafe} more with --unsafe-fixes" if unsafe and not unsafe_on else "") + ")" if safe or unsafe else ""
    return f"graphfix: {len(found)} finding(s){hint}; {len(results)} file(s) scanned, {checked} analysed{tail}"
