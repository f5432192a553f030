"""Reporters: diagnostics as text (``path:line:col: GFxxx [*] message``), GitHub annotations, JSON,
JSON lines, SARIF, JUnit XML or a GitLab Code Quality report. Format names follow ruff's
``--output-format``."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

from fixer.diff import display_path
from fixer.rule import Diagnostic, rule_url

if TYPE_CHECKING:  # the CI formats (XML, hashes) are imported only by a run that writes one
    from fixer.ci_formats import Error, Item


def fix_marker(diagnostic: Diagnostic, unsafe: bool) -> str:
    fix = diagnostic.fix
    if fix is None:
        return ""
    if fix.applicability.value == "safe" or unsafe:
        return "[*] "
    return "[-] "  # fixable with --unsafe-fixes


def location(path: str, d: Diagnostic) -> str:
    """``path:line:col``, or in a notebook ``path:cell N:line:col`` (as ruff writes it)."""
    cell = f"cell {d.cell}:" if d.cell is not None else ""
    return f"{display_path(path)}:{cell}{d.line}:{d.col + 1}"


# What a checked file's name or quoted source must not send to a terminal: control characters
# (ESC starts sequences that recolour, hide or retitle), line breaks, bidirectional overrides.
UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with each character a terminal would act on written as its escape (``\\x1b``)."""
    return UNPRINTABLE.sub(lambda m: ascii(m.group())[1:-1], text)


def text_lines(items: Iterable[Item], unsafe: bool) -> list[str]:
    return [printable(f"{location(path, d)}: {d.code} {fix_marker(d, unsafe)}{d.message}") for path, d in items]


def _escape_data(text: str) -> str:
    """GitHub workflow-command escaping of the message part."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """... and of a property value (file=..., title=...), where ``:`` and ``,`` are separators."""
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_lines(items: Iterable[Item]) -> list[str]:
    lines = []
    for path, d in items:
        name = display_path(path)
        properties = ",".join(
            f"{key}={_escape_property(str(value))}"
            for key, value in (
                ("title", f"graphfix ({d.code})"), ("file", name), ("line", d.line), ("col", d.col + 1),
                ("endLine", d.end_line), ("endColumn", d.end_col + 1),
            )
        )
        lines.append(f"::error {properties}::{_escape_data(f'{location(path, d)}: {d.code} {d.message}')}")
    return lines


def record(path: str, d: Diagnostic) -> dict:
    """One diagnostic as JSON: ruff's field names, plus the rule's name and documentation URL."""
    fix = None
    if d.fix is not None:
        fix = {
            "applicability": d.fix.applicability.value,
            "message": d.fix.title or None,
            "edits": [
                {
                    "content": e.text,
                    "location": {"row": e.location[0], "column": e.location[1]},
                    "end_location": {"row": e.end_location[0], "column": e.end_location[1]},
                }
                for e in d.fix.edits
            ],
        }
    return {
        "code": d.code,
        "name": d.name,
        "message": d.message,
        "url": rule_url(d.code),
        "filename": display_path(path),
        "cell": d.cell,  # notebooks: rows count within this cell
        "location": {"row": d.line, "column": d.col + 1},
        "end_location": {"row": d.end_line, "column": d.end_col + 1},
        "fix": fix,
        "fix_refused": d.fix_refused or None,
    }


def as_json(items: Iterable[Item]) -> str:
    return json.dumps([record(path, d) for path, d in items], indent=2)


def as_json_lines(items: Iterable[Item]) -> str:
    return "".join(json.dumps(record(path, d)) + "\n" for path, d in items)


def render(fmt: str, items: Sequence[Item], unsafe: bool, errors: Sequence[Error] = ()) -> str:
    """The whole report in ``fmt``, ending with a line break unless empty. ``errors`` name the
    files that could not be checked; formats with a place for them (SARIF, JUnit) carry them too,
    the others leave them to stderr."""
    writers: dict[str, Callable[[], str]] = {
        "text": lambda: "".join(line + "\n" for line in text_lines(items, unsafe)),
        "github": lambda: "".join(line + "\n" for line in github_lines(items)),
        "json": lambda: as_json(items) + "\n",
        "json-lines": lambda: as_json_lines(items),
        "sarif": lambda: _ci_formats().sarif(items, errors) + "\n",
        "junit": lambda: _ci_formats().junit(items, errors),
        "gitlab": lambda: _ci_formats().gitlab(items) + "\n",
    }
    return writers[fmt]()


def _ci_formats():
    from fixer import ci_formats

    return ci_formats


FORMATS = ("text", "json", "json-lines", "github", "gitlab", "junit", "sarif")
