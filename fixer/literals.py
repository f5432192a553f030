"""The pre-filter's second look, once a file is parsed: a backward call written inside a string
literal (a docstring's prose, ``"torch.autograd.grad"`` in a list of names) is no code, and a rule
the file passed only through such text needs no analysis of it.

The byte pre-filter skips comment and doctest lines but cannot tell a docstring from code; the
tree can. Each match of a backward-call alternative is located in the tree by descending from the
module through the nodes whose span holds it; where the innermost one is a ``str`` or ``bytes``
constant (never one inside an f-string, whose ``{...}`` parts are code), that literal is blanked
and the pre-filter asked again of the text so blanked. Blanking only removes text outside code, so
a rule the second look drops could find nothing: its needles are facts of code."""

from __future__ import annotations

import ast
import bisect
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
