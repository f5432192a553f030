"""Statements indexed by where they start, for questions asked at every statement of a long scope
(a notebook's module of many cells): which of a name's definitions lie in a loop, which start
before a point. A bisection and the answers, where a scan of every definition made the scope's
analysis quadratic (issue 26).

A node of the tree lies within the span of each node that holds it, so "starts within the loop's
span" finds every statement of the loop (callers confirm each one against the tree). Answers keep
the order of the list the index was built from: the analyses read it in that order."""

from __future__ import annotations

import ast
import bisect
from typing import Sequence

Position = tuple[int, int]


def start(node: ast.AST) -> Position:
    return node.lineno, node.col_offset


def end(node: ast.AST) -> Position:
    return node.end_lineno, node.end_col_offset


class Placed:
    """Indices of a list of statements (in any order), by start position."""

    def __init__(self, nodes: Sequence[ast.AST]) -> None:
        self._order = sorted(range(len(nodes)), key=lambda i: start(nodes[i]))
        self._starts = [start(nodes[i]) for i in self._order]
        self._latest: list[int] = []  # of the first k statements by position, the last in the list
        for index in self._order:
            self._latest.append(max(index, self._latest[-1]) if self._latest else index)
        self._at: dict[int, list[int]] = {}
        for index, node in enumerate(nodes):
            self._at.setdefault(id(node), []).append(index)

    def last_before(self, position: Position) -> int:
        """The greatest index of a statement starting before ``position`` (-1: none)."""
        count = bisect.bisect_left(self._starts, position)
        return self._latest[count - 1] if count else -1

    def starting_before(self, position: Position, inclusive: bool = False) -> list[int]:
        """Indices of the statements starting before (or at) ``position``, in list order."""
        find = bisect.bisect_right if inclusive else bisect.bisect_left
        return sorted(self._order[: find(self._starts, position)])

    def starting_within(self, node: ast.AST) -> list[int]:
        """Indices of the statements starting within ``node``'s span (all: a module), in list order."""
        if not hasattr(node, "lineno"):
            return sorted(self._order)
        low = bisect.bisect_left(self._starts, start(node))
        high = bisect.bisect_right(self._starts, end(node))
        return sorted(self._order[low:high])

    def of(self, node: ast.AST) -> list[int]:
        """Indices at which ``node`` itself is in the list."""
        return self._at.get(id(node), [])


NOWHERE = Placed(())  # an empty list of statements
