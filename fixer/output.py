"""Reporters: diagnostics as text (``path:line:col: GFxxx [*] message``), JSON or GitHub annotations."""

from __future__ import annotations

import json
from typing import Iterable

from fixer.diff import display_path
from fixer.rule import Diagnostic

FORMATS = ("text", "json", "github")


def fix_marker(diagnostic: Diagnostic, unsafe: bool) -> str:
    fix = diagnostic.fix
    if fix is None:
        return ""
    if fix.applicability.value == "safe" or unsafe:
        return "[*] "
    return "[-] "  # fixable with --unsafe-fixes


def text_lines(items: Iterable[tuple[str, Diagnostic]], unsafe: bool) -> list[str]:
    return [
        f"{display_path(path)}:{d.line}:{d.col + 1}: {d.code} {fix_marker(d, unsafe)}{d.message}"
        for path, d in items
    ]


def _escape_data(text: str) -> str:
    """GitHub workflow-command escaping of the message part."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    """... and of a property value (file=..., title=...), where ``:`` and ``,`` are separators."""
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github_lines(items: Iterable[tuple[str, Diagnostic]]) -> list[str]:
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
        lines.append(f"::error {properties}::{_escape_data(f'{name}:{d.line}:{d.col + 1}: {d.code} {d.message}')}")
    return lines


def as_json(items: Iterable[tuple[str, Diagnostic]]) -> str:
    records = []
    for path, d in items:
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
        records.append(
            {
                "code": d.code,
                "name": d.name,
                "message": d.message,
                "filename": display_path(path),
                "location": {"row": d.line, "column": d.col + 1},
                "end_location": {"row": d.end_line, "column": d.end_col + 1},
                "fix": fix,
                "fix_refused": d.fix_refused or None,
            }
        )
    return json.dumps(records, indent=2)
