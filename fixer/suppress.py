"""Suppression comments: ``# graphfix: ignore`` or ``# graphfix: ignore[GF101, GF301]`` on a line
of the flagged code silences the diagnostics that start or end there."""

from __future__ import annotations

import io
import re
import tokenize
from typing import Optional

IGNORE_RE = re.compile(r"#\s*graphfix:\s*ignore(?:\[(?P<codes>[A-Z0-9,\s]+)\])?", re.IGNORECASE)

# line -> None (all codes) or the set of codes ignored there
Suppressions = dict[int, Optional[frozenset[str]]]


def find_suppressions(source: str) -> Suppressions:
    if "graphfix" not in source:
        return {}
    found: Suppressions = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return {}
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        match = IGNORE_RE.search(token.string)
        if not match:
            continue
        line = token.start[0]
        codes = match.group("codes")
        if codes is None:
            found[line] = None
        elif found.get(line, frozenset()) is not None:
            new = frozenset(c.strip().upper() for c in codes.split(",") if c.strip())
            found[line] = (found.get(line) or frozenset()) | new
    return found


def is_suppressed(suppressions: Suppressions, code: str, line: int, end_line: int) -> bool:
    for candidate in {line, end_line}:
        if candidate in suppressions:
            codes = suppressions[candidate]
            if codes is None or code in codes:
                return True
    return False
