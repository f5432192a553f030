"""The examples' comments stay true after their fix (issue 24 §10): `graphfix --fix` rewrites a
line and keeps its trailing comment, so a comment that says the line is buggy ("keeps this
batch's graph alive") would then sit on the line that no longer is. Comments in examples/ describe
the line neutrally; the bug is told by each example's docstring and examples/README.md."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest

from fixer.engine import Options, process_source
from fixer.registry import all_rules
from fixer.source import decode

EXAMPLES = sorted((Path(__file__).resolve().parent.parent / "examples").glob("*.py"))
# what a comment says when it describes the bug, not the line
BUGGY = ("alive", "freed", "wipes", "with its graph", "outside the loop", "built once", "leak", "bug", "the same every",
         "stale", "raises", "second time")


def comments(text: str) -> list[tuple[int, str]]:
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT]


def fixed_text(path: Path) -> str:
    data = path.read_bytes()
    result = process_source(str(path), data, Options(rules=all_rules(), fix=True, unsafe=True), decode(data))
    assert result.changed and not result.errors, (path.name, result.errors)
    return result.fixed


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_no_fixed_example_keeps_a_comment_that_calls_its_line_buggy(example):
    stale = [(line, text) for line, text in comments(fixed_text(example)) if any(word in text.lower() for word in BUGGY)]
    assert not stale, f"{example.name} after --fix: {stale}"
