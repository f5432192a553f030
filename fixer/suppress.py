"""Suppression comments.

``# graphfix: ignore[GF301, needless-retain-graph]`` on the first or last line of the flagged code
silences those rules there; ``# graphfix: ignore`` silences every rule there.
``# graphfix: ignore-file[GF301]`` / ``# graphfix: ignore-file`` anywhere in a comment: the same
for the whole file. Rules are named by full code or by name (no prefixes, as ruff's ``noqa``); a
reason follows as a comment of its own: ``# graphfix: ignore[GF301]  # why``.

A bare ``ignore``/``ignore-file`` covers every rule except the GF0xx family, whose findings are
about these comments (GF001 reports a bare ``ignore`` that is unused); name them to silence them.

A directive that does not parse (``ignore [GF301]``, ``ignored``, ``ignore[``) suppresses nothing,
and an entry naming no rule suppresses nothing: each is a warning, never widened to "every rule"."""

from __future__ import annotations

import re
import tokenize
from dataclasses import dataclass, field
from typing import Optional

from fixer.source import split_lines

_START = re.compile(r"#\s*graphfix\s*:\s*", re.IGNORECASE)
# the directive right after "graphfix:"; what follows it must be nothing or another comment
_FORM = re.compile(r"(?P<kind>ignore-file|ignore)(?:\[(?P<list>[^\[\]#]*)\])?(?=\s*(?:#|$))", re.IGNORECASE)
_NEEDLE = re.compile("graphfix", re.IGNORECASE)
_SYNTAX = "expected `# graphfix: ignore`, `ignore[CODE, ...]`, `ignore-file` or `ignore-file[CODE, ...]`"


@dataclass(frozen=True)
class Entry:
    """One rule named in a directive's list, as written."""

    text: str
    start: int  # character offsets in the source
    end: int
    code: Optional[str]  # the rule's code; None: names no rule


@dataclass(frozen=True)
class Directive:
    line: int
    start: int  # offset of its '#'
    end: int  # offset just after it (after ']' or the keyword)
    comment_end: int  # offset of the end of the comment it is in
    file_level: bool
    entries: Optional[tuple[Entry, ...]]  # None: every rule
    list_span: tuple[int, int] = (0, 0)  # offsets of the text between '[' and ']'

    def covers(self, code: str, line: int, end_line: int) -> bool:
        if not self.file_level and self.line not in (line, end_line):
            return False
        if self.entries is None:  # every rule but those about the comments themselves (GF0xx)
            return not code.startswith("GF0")
        return any(entry.code == code for entry in self.entries)


@dataclass
class Suppressions:
    directives: list[Directive] = field(default_factory=list)
    warnings: list[tuple[int, int, str]] = field(default_factory=list)  # (line, 1-based column, message)

    def suppresses(self, code: str, line: int, end_line: int) -> bool:
        return any(d.covers(code, line, end_line) for d in self.directives)


def suppressions_of(ctx) -> Suppressions:
    """A parsed file's suppressions, found once per file (the engine and GF001 both ask)."""
    if "suppressions" not in ctx.cache:
        ctx.cache["suppressions"] = find_suppressions(ctx.source)
    return ctx.cache["suppressions"]


def find_suppressions(source: str) -> Suppressions:
    found = Suppressions()
    if not _may_hold_directive(source):
        return found
    lines = split_lines(source)  # Python's line breaks, so rows agree with the AST's
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    try:
        tokens = list(tokenize.generate_tokens(iter(lines).__next__))
    except (tokenize.TokenError, SyntaxError, StopIteration):
        return found
    for token in tokens:
        if token.type == tokenize.COMMENT:
            row, col = token.start
            _parse_comment(token.string, row, col, starts[row - 1] + col, found)
    return found


def _may_hold_directive(source: str) -> bool:
    """``_NEEDLE`` matches: an ASCII text is searched lowered, at ``str.find`` speed (a
    case-insensitive regex tries every character, 20 times slower on a large file)."""
    return "graphfix" in source.lower() if source.isascii() else _NEEDLE.search(source) is not None


def _parse_comment(comment: str, row: int, col: int, base: int, found: Suppressions) -> None:
    """``comment`` starts at column ``col`` of line ``row``, at offset ``base`` of the source."""
    for start in _START.finditer(comment):
        if start.start() > 0 and comment[start.start() - 1] not in " \t#":
            continue  # "foo#graphfix:" is not a directive
        where = (row, col + start.start() + 1)
        form = _FORM.match(comment, start.end())
        if form is None:
            written = comment[start.start():].split("#", 2)[1].strip()
            found.warnings.append((*where, f"malformed suppression `# {written}`: {_SYNTAX}; it suppresses nothing"))
            continue
        entries, span = None, (0, 0)
        if form.group("list") is not None:
            span = (base + form.start("list"), base + form.end("list"))
            entries = _entries(form.group("list"), span[0], where, found)
            if not entries:
                found.warnings.append((*where, f"empty suppression list: {_SYNTAX}; it suppresses nothing"))
                continue
        file_level = form.group("kind").lower() == "ignore-file"
        found.directives.append(Directive(row, base + start.start(), base + form.end(), base + len(comment), file_level, entries, span))


def _entries(text: str, offset: int, where: tuple[int, int], found: Suppressions) -> tuple[Entry, ...]:
    from fixer.registry import all_rules  # the registry imports the rules, which import fixer

    known = {rule.code: rule.code for rule in all_rules()} | {rule.name: rule.code for rule in all_rules()}
    entries = []
    for part in re.finditer(r"[^,]+", text):
        name = part.group(0).strip()
        if not name:
            continue
        start = offset + part.start() + (len(part.group(0)) - len(part.group(0).lstrip()))
        code = known.get(name.upper()) or known.get(name.lower())
        if code is None:
            prefix = any(rule.code.startswith(name.upper()) for rule in all_rules())
            hint = " (name a full code or a rule name; prefixes are not accepted)" if prefix else ""
            found.warnings.append((*where, f"unknown rule `{name}` in suppression{hint}; it suppresses nothing"))
        entries.append(Entry(name, start, start + len(name), code))
    return tuple(entries)
