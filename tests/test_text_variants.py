"""Every fixture under every text variant gives the same fix as without it.

A variant changes only how the program is written down (newline style, BOM, encoding cookie,
tabs, a missing final newline, non-ASCII before a fixed column) or adds a character that
``str.splitlines()`` takes for a line break but Python does not (form feed, VT, ``\\x1c``-``\\x1e``,
U+0085, U+2028/9). For a variant T: fix(T(before)) == T(fix(before)) and an ok fixture stays
byte-identical. Positions that drift by one line write wrong code, so this is the guard for the
engine's line table."""

from __future__ import annotations

import re
from typing import Callable, Optional

import pytest

from fixer.engine import Options, process_source
from tests.fixture_cases import discover
from tests.helpers import rule_for_module, strip_markers

CASES = discover()
BEFORE = [c for c in CASES if c.before]
OK = [c for c in CASES if c.ok]

# Characters str.splitlines() breaks at and Python does not.
EXOTIC = ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _first_line_matching(text: str, pattern: str) -> int:
    match = re.search(pattern, text, re.M)
    return match.start() if match else 0


def _insert_at(text: str, at: int, piece: str) -> str:
    return text[:at] + piece + text[at:]


def _after_first_line(text: str) -> int:
    return text.index("\n") + 1


def _tabs(text: str) -> str:
    def indent(match: re.Match) -> str:
        return "\t" * (len(match.group(0)) // 4) + " " * (len(match.group(0)) % 4)

    return re.sub(r"^ +", indent, text, flags=re.M)


def _comment_headers(text: str) -> str:
    """Non-ASCII comments after compound-statement headers: byte and character columns differ after them."""
    return re.sub(r"^(\s*(?:for|while|def|class)\b[^#\n]*:)[ \t]*$", r"\1  # é€ — ü", text, flags=re.M)


Variant = Callable[[str], str]
VARIANTS: dict[str, Variant] = {
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "cr": lambda t: t.replace("\n", "\r"),
    "no-final-newline": lambda t: t.rstrip("\n"),
    "tabs": _tabs,
    "non-ascii-comments": _comment_headers,
    "formfeed-line": lambda t: _insert_at(t, _first_line_matching(t, r"^(import|from) "), "\x0c\n"),
    "formfeed-indent": lambda t: _insert_at(t, _first_line_matching(t, r"^(def|for|class|while) "), "\x0c"),
    "two-formfeeds": lambda t: "#\x0c\x0c\n" + t,
    **{f"comment-U+{ord(c):04X}": (lambda c: lambda t: _insert_at(t, _after_first_line(t), f"# a{c}b\n"))(c) for c in EXOTIC},
    "string-VT": lambda t: _insert_at(t, _after_first_line(t), '_page = "a\\x0b" + "\x0bb"\n'),
    "string-U+2028": lambda t: _insert_at(t, _after_first_line(t), '_sep = "\u2028"\n'),
}
# Byte-level variants: the same text, other bytes on disk.
ENCODINGS: dict[str, Callable[[str], Optional[bytes]]] = {
    "bom": lambda t: b"\xef\xbb\xbf" + t.encode("utf-8"),
    "latin-1-cookie": lambda t: _latin1(t),
}


def _latin1(text: str) -> Optional[bytes]:
    try:
        return ("# -*- coding: latin-1 -*-\n" + text).encode("latin-1")
    except UnicodeEncodeError:
        return None


def _fix(case, data: bytes) -> tuple[str, list]:
    result = process_source(str(case.before or case.ok), data, Options(rules=(rule_for_module(case.rule_module),), fix=True, unsafe=True))
    assert not result.errors, result.errors
    # the engine matches findings across each pass of fixes by position: a slip under a variant
    # would take a finding that only moved for a new one and refuse the fix
    assert not result.refused, result.refused
    return (result.fixed if result.changed else None), result.diagnostics


def _params(cases, table):
    return [pytest.param(case, name, id=f"{case.id}-{name}") for case in cases for name in table]


@pytest.mark.parametrize("case,variant", _params(BEFORE, VARIANTS))
def test_variant_gets_the_same_fix(case, variant):
    transform = VARIANTS[variant]
    source = strip_markers(case.before.read_text(encoding="utf-8"))
    fixed, found = _fix(case, source.encode("utf-8"))
    assert fixed is not None
    fixed_variant, found_variant = _fix(case, transform(source).encode("utf-8"))
    assert fixed_variant == transform(fixed)
    assert sorted(d.code for d in found_variant) == sorted(d.code for d in found)


@pytest.mark.parametrize("case,variant", _params(BEFORE, ENCODINGS))
def test_encoding_variant_gets_the_same_fix(case, variant):
    source = strip_markers(case.before.read_text(encoding="utf-8"))
    data = ENCODINGS[variant](source)
    if data is None:
        pytest.skip("the fixture has characters the encoding cannot hold")
    fixed, _ = _fix(case, source.encode("utf-8"))
    fixed_variant, _ = _fix(case, data)
    expected = ENCODINGS[variant](fixed).decode("latin-1" if variant == "latin-1-cookie" else "utf-8-sig")
    assert fixed_variant == expected


@pytest.mark.parametrize("case,variant", _params(OK, VARIANTS))
def test_variant_of_correct_code_is_left_alone(case, variant):
    source = case.ok.read_text(encoding="utf-8")
    fixed, found = _fix(case, VARIANTS[variant](source).encode("utf-8"))
    assert found == [] and fixed is None
