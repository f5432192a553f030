"""Running the engine in-process the way the CLI does, for tests."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from fixer.engine import FileResult, Options, process_source
from fixer.registry import all_rules
from fixer.rule import Rule

EXPECT_RE = re.compile(r"#\s*expect:\s*(GF\d{3}(?:\s*,\s*GF\d{3})*)")
MARKER_COMMENT_RE = re.compile(r"[ \t]*#\s*expect:\s*GF\d{3}(?:\s*,\s*GF\d{3})*[ \t]*$", re.MULTILINE)


def rule_for_module(module: str) -> type[Rule]:
    matches = [rule for rule in all_rules() if rule.__module__ == f"codemods.{module}"]
    assert len(matches) == 1, f"no rule module codemods/{module}.py for fixtures/{module}/"
    return matches[0]


def run(path: Path, rules: Sequence[type[Rule]], fix: bool = True, unsafe: bool = True) -> FileResult:
    data = path.read_bytes()
    return process_source(str(path), data, Options(rules=tuple(rules), fix=fix, unsafe=unsafe))


def fixed_text(result: FileResult, original: str) -> str:
    return result.fixed if result.changed else original


def strip_markers(text: str) -> str:
    """The fixed text minus the ``# expect:`` markers, which only the before file carries."""
    return MARKER_COMMENT_RE.sub("", text)


def expected_markers(text: str) -> list[tuple[int, str]]:
    """(line, code) for each ``# expect: GFxxx`` marker."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = EXPECT_RE.search(line)
        if match:
            found.extend((number, code.strip()) for code in match.group(1).split(","))
    return sorted(found)
