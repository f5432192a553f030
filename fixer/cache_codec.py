"""A file's result as plain JSON values for the result cache, and back.

Only results that are a pure function of the files read are stored: no error but one the same
bytes always give (an unreadable file may be readable next time; a crash may depend on memory or
stack), and no fix computed or written
(the entry describes the file's content as it was analysed). Such a result is the same in check,
``--diff`` and ``--fix`` runs while none of its fixes is applied."""

from __future__ import annotations

from typing import Any, Optional

from fixer.engine import FileResult
from fixer.rule import Applicability, Diagnostic, Edit, Fix


# Errors that are a function of the file's bytes (and the settings in the key): the same bytes
# give the same error. Any other error (cannot read, a crash, out of memory) is never stored.
LASTING_ERRORS = ("cannot decode: ", "binary file ", "too large to analyse ", "cannot parse: ")
PASSING_ERRORS = ("cannot parse: MemoryError", "cannot parse: RecursionError")


def cacheable(result: FileResult) -> bool:
    lasting = all(e.startswith(LASTING_ERRORS) and not e.startswith(PASSING_ERRORS) for e in result.errors)
    return lasting and not (result.internal or result.fixed is not None or result.written or result.cells)


def would_fix(result: FileResult, unsafe: bool) -> bool:
    """True if a ``--diff``/``--fix`` run would apply one of the result's fixes (then the cached
    check result is not that run's answer)."""
    return any(d.fix and (unsafe or d.fix.applicability is Applicability.SAFE) for d in result.diagnostics)


def encode(result: FileResult) -> list:
    return [int(result.parsed), [_diagnostic(d) for d in result.diagnostics], [list(w) for w in result.warnings], result.errors]


def decode(path: str, value: Any) -> FileResult:
    """Raises (ValueError, TypeError, KeyError, IndexError) on a value this code did not write."""
    parsed, diagnostics, warnings, errors = value
    found = [_to_diagnostic(d) for d in diagnostics]
    return FileResult(
        path, diagnostics=found, remaining=list(found), parsed=bool(parsed), errors=[str(e) for e in errors],
        warnings=[(int(line), int(col), str(message)) for line, col, message in warnings],
    )


def _diagnostic(d: Diagnostic) -> list:
    fix = None
    if d.fix is not None:
        edits = [[e.start, e.end, e.text, list(e.location), list(e.end_location)] for e in d.fix.edits]
        fix = [d.fix.applicability.value, d.fix.title, edits]
    return [d.code, d.name, d.message, d.line, d.col, d.end_line, d.end_col, d.cell, fix]


def _to_diagnostic(value: list) -> Diagnostic:
    code, name, message, line, col, end_line, end_col, cell, fix = value
    return Diagnostic(str(code), str(name), str(message), int(line), int(col), int(end_line), int(end_col), _to_fix(fix), cell)


def _to_fix(value: Optional[list]) -> Optional[Fix]:
    if value is None:
        return None
    applicability, title, edits = value
    return Fix(
        tuple(Edit(int(s), int(e), str(t), (int(a[0]), int(a[1])), (int(b[0]), int(b[1]))) for s, e, t, a, b in edits),
        Applicability(applicability), str(title),
    )
