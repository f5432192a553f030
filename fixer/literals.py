"""The pre-filter's second look, once a file is parsed: a backward call written inside a string
literal (a docstring's prose, ``"torch.autograd.grad"`` in a list of names) is no code, and a rule
the file passed only through such text needs no analysis of it.

The byte pre-filter skips comment and doctest lines but cannot tell a docstring from code; the
tree can. Each match of a backward-call alternative is located in the tree by descending from the
module through the nodes whose span holds it; where the innermost one is a ``str`` or ``bytes``
constant (never one inside an f-string, whose ``{...}`` parts are code), that literal is blanked
and the pre-filter asked again of the text so blanked. Blanking only removes text outside code, so
a rule the second look drops could find nothing: its needles are facts of code.

``blanked_by_tokens`` makes the same bytes from the string tokens, before any parse, where they
tell: a file whose every match lies in such literals (or on comment lines) is then never parsed,
as one the byte pre-filter skips."""

from __future__ import annotations

import ast
import bisect
import re
from itertools import accumulate
from typing import Iterator, Optional

from fixer.nodes import child_nodes
from fixer.rule import BACKWARD_PARTS

BLANK = bytes(0x0A if b == 0x0A else 0x20 for b in range(256))  # every byte a space but line breaks
Placed = list[tuple[int, int, ast.AST]]  # (start, end, child): a node's children with their byte spans


def blanked_literals(text: str, tree: ast.Module) -> Optional[bytes]:
    """``text`` as UTF-8 with every string literal that holds a backward-call match replaced by
    spaces (line breaks kept); None when no literal holds one."""
    if "backward" not in text and "grad" not in text:
        return None
    data = text.encode("utf-8", "surrogatepass")
    if b"\r" in data:
        return None  # lone CRs end lines for the parser: offsets would need its line splitting
    starts = [0, *accumulate(map(len, data.splitlines(True)))]  # each line's first byte (bytes split at \n only here)
    placed: dict[int, Placed] = {}
    spans = {
        span
        for part in BACKWARD_PARTS
        for match in part.finditer(data)
        if (span := _literal_around(tree, starts, match.start(), match.end(), placed))
    }
    return _blanked(data, spans)


def _blanked(data: bytes, spans: set[tuple[int, int]]) -> Optional[bytes]:
    """``data`` with the ``spans`` blanked (None: no span)."""
    if not spans:
        return None
    out = bytearray(data)
    for start, end in spans:
        out[start:end] = data[start:end].translate(BLANK)
    return bytes(out)


def _literal_around(tree: ast.Module, starts: list[int], low: int, high: int, placed: dict[int, Placed]) -> Optional[tuple[int, int]]:
    """The byte span of the ``str``/``bytes`` constant holding ``data[low:high]``; None when the
    text lies in code, in a comment, or in an f-string. ``placed``: each node's children by start."""
    node: ast.AST = tree
    while True:
        children = placed.get(id(node))
        if children is None:
            children = placed[id(node)] = sorted(_placed_children(node, starts), key=lambda c: c[0])
        at = bisect.bisect_right(children, low, key=lambda c: c[0]) - 1  # siblings never overlap
        if at < 0 or children[at][1] < high:
            return None
        start, end, child = children[at]
        if isinstance(child, ast.JoinedStr):
            return None
        if isinstance(child, ast.Constant):
            return (start, end) if isinstance(child.value, (str, bytes)) else None
        node = child


def _placed_children(node: ast.AST, starts: list[int]) -> Iterator[tuple[int, int, ast.AST]]:
    """(start, end, child) of the children of ``node`` that have a position; the children of one
    without (``arguments``, ``comprehension``, ``withitem``, ``match_case``) in its place."""
    for child in child_nodes(node):
        end_line = getattr(child, "end_lineno", None)
        if end_line is None:
            yield from _placed_children(child, starts)
        else:
            yield starts[child.lineno - 1] + child.col_offset, starts[end_line - 1] + child.end_col_offset, child


QUOTE_OR_COMMENT = re.compile(rb"[#'\"]")
# the rest of a string token after its opening quote (loops unrolled: a run of plain bytes at a time)
STRING_END = {q: re.compile(rb"[^\\%s\n]*(?:\\.[^\\%s\n]*)*%s" % (q, q, q), re.DOTALL) for q in (b"'", b'"')}
STRING_END.update({q * 3: re.compile(rb"[^\\%s]*(?:(?:\\.|%s(?!%s))[^\\%s]*)*%s" % (q, q, q * 2, q, q * 3), re.DOTALL)
                   for q in (b"'", b'"')})
TRIPLES = (b"'''", b'"""')
PREFIXES = frozenset({b"r", b"u", b"b", b"f", b"br", b"rb", b"fr", b"rf"})  # a string's, lowered (Python 3)
WORD = frozenset(b"_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
GAP = re.compile(rb"(?:[ \t\f\n]|\\\n|#[^\n]*)*")  # what may part two string tokens of one literal
Token = tuple[int, int, bool]  # (start, end, f-string): a string token's bytes, prefix and quotes included


def blanked_by_tokens(text: str) -> Optional[bytes]:
    """``blanked_literals(text, tree)`` without the tree, where the string tokens tell: None when
    no literal holds a match, or when one may lie in a literal they cannot place (an f-string, a
    string continued by another: ``"a" "b"`` is one literal). The tokens are read only as far as
    the matches need, and no further than the first match in code (most files: the tree's)."""
    if ("backward" not in text and "grad" not in text) or "\r" in text:
        return None
    data = text.encode("utf-8", "surrogatepass")  # (as the tree's offsets count)
    scan, tokens, starts, spans = _string_tokens(data), [], [], set()
    for low, high in sorted((m.start(), m.end()) for part in BACKWARD_PARTS for m in part.finditer(data)):
        while not tokens or tokens[-1][0] <= low:  # up to the token after the match's (it may continue it)
            token = next(scan, ())
            if token is None:
                return None
            if not token:
                break
            tokens.append(token)
            starts.append(token[0])
        at = bisect.bisect_right(starts, low) - 1
        start, end, formatted = tokens[at] if at >= 0 else (0, 0, False)
        if end <= low:  # code or a comment, left as the tree leaves it
            if data.rfind(b"#", data.rfind(b"\n", 0, low) + 1, low) < 0:
                return None
            continue
        if formatted or end < high or _continued(data, tokens, at):
            return None
        spans.add((start, end))
    return _blanked(data, spans)


def _string_tokens(data: bytes) -> Iterator[Optional[Token]]:
    """The string tokens of ``data`` in order, comments skipped; None at an unterminated string."""
    at = 0
    while (found := QUOTE_OR_COMMENT.search(data, at)) is not None:
        at = found.start()
        if data[at] == 0x23:  # '#': to the end of its line
            end = data.find(b"\n", at)
            at = len(data) if end < 0 else end
            continue
        word = at
        while word > 0 and word > at - 3 and data[word - 1] in WORD:
            word -= 1
        # (``return"x"``: a keyword, then a string)
        prefix = data[word:at] if not (word and data[word - 1] in WORD) and data[word:at].lower() in PREFIXES else b""
        quote = data[at : at + 3] if data[at : at + 3] in TRIPLES else data[at : at + 1]
        closed = STRING_END[quote].match(data, at + len(quote))
        if closed is None:
            yield None
            return
        yield at - len(prefix), closed.end(), b"f" in prefix.lower()
        at = closed.end()


def _continued(data: bytes, tokens: list[Token], at: int) -> bool:
    """Another string token follows or precedes token ``at`` with only blanks, line breaks and
    comments between (in brackets one literal, else two statements: the tree tells)."""
    before = at > 0 and GAP.fullmatch(data, tokens[at - 1][1], tokens[at][0]) is not None
    return before or at + 1 < len(tokens) and GAP.fullmatch(data, tokens[at][1], tokens[at + 1][0]) is not None
