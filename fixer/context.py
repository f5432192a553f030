"""One parsed file as the rules see it: source text, AST, positions and parent links."""

from __future__ import annotations

import ast
import bisect
import functools
import re
from typing import Iterator, Optional

from fixer.nodes import child_nodes, walk
from fixer.source import split_lines


_MISSING = object()
NOTHING = re.compile("(?!)")  # a pattern that matches nowhere: no text need be searched for it


@functools.lru_cache(maxsize=None)
def _literal_first(pattern: "re.Pattern[str]") -> tuple["re.Pattern[str]", bool]:
    """``pattern`` without a leading ``\b`` before a name, and whether it had one: ``re`` finds a
    literal start at memchr speed but tries a ``\b`` at every character, ten times slower."""
    if pattern.pattern.startswith(r"\b") and re.match(r"\(\?:\w|\w", pattern.pattern[2:]):
        return re.compile(pattern.pattern[2:], pattern.flags), True
    return pattern, False


def _word_character(char: str) -> bool:
    return char.isalnum() or char == "_"


_WORD = re.compile(r"\w+")
_OPTIONAL_LAST = re.compile(r"(\w+)\w\?")  # ``requires_grad_?``: starts where ``requires_grad`` does
_CALLED = r"\s*\("  # a suffix of the words' group: a call (its text has no word character to start another match)
_CALL = re.compile(_CALLED)


@functools.lru_cache(maxsize=None)
def _word_alternation(pattern: "re.Pattern[str]") -> Optional[tuple[tuple[str, ...], bool, bool, bool]]:
    r"""(words, leading ``\b``, trailing ``\b``, called) when ``pattern`` is ``a|b|c``,
    ``\b(?:a|b)\b`` or ``\b(?:a|b)\s*\(`` over plain words (an alternative may end in one
    optional word character unless something follows), else None. Such a pattern starts a match
    on the lines where one of its words starts an occurrence with the boundaries (and the call
    after it): a match hiding another overlaps it on its line."""
    text = pattern.pattern
    if pattern.flags != re.UNICODE:
        return None
    leading, trailing = text.startswith(r"\b"), text.endswith(r"\b") and not text.endswith(r"\\b")
    called = text.endswith(")" + _CALLED)
    inner = text[2 if leading else 0 : -2 if trailing else -len(_CALLED) if called else None]
    if inner.startswith("(?:") and inner.endswith(")"):
        inner = inner[3:-1]
    elif leading or trailing or called:
        return None  # ``\ba|b``: the boundary belongs to the first alternative only
    words = []
    for alternative in inner.split("|"):
        optional = None if trailing or called else _OPTIONAL_LAST.fullmatch(alternative)
        if optional is None and not _WORD.fullmatch(alternative):
            return None
        words.append(optional.group(1) if optional else alternative)
    return tuple(words), leading, trailing, called


class FileContext:
    def __init__(self, path: str, source: str, tree: Optional[ast.Module] = None, newline: str = "\n", root: Optional[str] = None):
        self.path = path
        self.root = root  # the project's folder, when known: cross-file analysis stays inside it
        self.source = source
        self.newline = newline
        self.tree = tree if tree is not None else ast.parse(source, filename=path)
        self.lines = split_lines(source)
        starts = [0]
        for line in self.lines:
            starts.append(starts[-1] + len(line))
        self._line_starts = starts
        self.cache: dict[object, object] = {}  # shared analysis results, computed once per file
        self._parents: dict[ast.AST, ast.AST] = {}
        self._all_parents = False
        self._made_up: set[ast.AST] = set()  # nodes the analysis built, never in the tree

    # -- positions -------------------------------------------------------------------------
    def char_col(self, lineno: int, byte_col: int) -> int:
        """ast columns are UTF-8 byte offsets; convert to a character column."""
        line = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        if line.isascii():
            return byte_col
        return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))

    def offset(self, lineno: int, byte_col: int) -> int:
        return self._line_starts[lineno - 1] + self.char_col(lineno, byte_col)

    def position(self, node: ast.AST) -> tuple[int, int, int, int]:
        return (
            node.lineno,
            self.char_col(node.lineno, node.col_offset),
            node.end_lineno or node.lineno,
            self.char_col(node.end_lineno or node.lineno, node.end_col_offset or node.col_offset),
        )

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)
        end = self.offset(node.end_lineno, node.end_col_offset)
        # A node that starts with "(" inside parentheses keeps them; ast drops the outer ones.
        return start, end

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def row_col(self, offset: int) -> tuple[int, int]:
        """1-based (row, column) of a character offset."""
        row = bisect.bisect_right(self._line_starts, offset) - 1
        row = min(row, len(self.lines) - 1) if self.lines else 0
        return row + 1, offset - self._line_starts[row] + 1

    def line_start(self, lineno: int) -> int:
        return self._line_starts[lineno - 1]

    def line_end(self, lineno: int) -> int:
        """Offset just past the line's newline (or end of file)."""
        return self._line_starts[lineno]

    def indent_of(self, lineno: int) -> str:
        line = self.lines[lineno - 1]
        return line[: len(line) - len(line.lstrip(" \t"))]

    @property
    def indent_unit(self) -> str:
        """One level of indentation as this file writes it (a tab, 2 or 4 spaces...); 4 spaces if unknown."""

        def compute() -> str:
            for node in walk(self.tree):
                body = getattr(node, "body", None)
                if isinstance(node, ast.stmt) and isinstance(body, list) and body and body[0].lineno > node.lineno:
                    outer, inner = self.indent_of(node.lineno), self.indent_of(body[0].lineno)
                    if inner.startswith(outer) and len(inner) > len(outer):
                        return inner[len(outer) :]
            return "    "

        return self.memo("indent_unit", compute)

    # -- structure -------------------------------------------------------------------------
    # Parent links are recorded by the walks the analysis already does (statements of the file,
    # then the expressions of each scope a rule asks about); the full map is built only on a miss.
    def set_parent(self, child: ast.AST, parent: ast.AST) -> None:
        self._parents[child] = parent

    def made_up(self, node: ast.AST) -> None:
        """``node`` stands for a value but lies in no tree (``call[i]`` for an unpacked target): it
        has no parent, known without mapping the whole file to look for it."""
        self._made_up.add(node)

    @property
    def parent_links(self) -> dict[ast.AST, ast.AST]:
        """The links recorded so far, for a walk that records each child's as it lists it."""
        return self._parents

    def set_parents(self, children: list[ast.AST], parent: ast.AST) -> None:
        for child in children:
            self._parents[child] = parent

    @property
    def parents(self) -> dict[ast.AST, ast.AST]:
        if not self._all_parents:
            todo = [self.tree]  # (depth first: each node's children listed once, not twice as in a walk)
            while todo:
                node = todo.pop()
                children = child_nodes(node)
                self.set_parents(children, node)
                todo += children
            self._all_parents = True
        return self._parents

    def parent(self, node: ast.AST) -> Optional[ast.AST]:
        found = self._parents.get(node)
        if found is None and node is not self.tree and not self._all_parents and node not in self._made_up:
            self._record_around(node)  # the statement that holds it first: a few nodes, not the file
            found = self._parents.get(node)
            if found is None:
                found = self.parents.get(node)
        return found

    def _record_around(self, node: ast.AST) -> None:
        """Record the parent links under the innermost statement whose span holds ``node``."""
        if getattr(node, "end_lineno", None) is None:
            return
        start, end = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)
        holder: ast.AST = self.tree
        while (inner := _statement_holding(holder, start, end)) is not None:
            self._parents[inner] = holder  # (a statement asked for its own parent finds it here)
            holder = inner
        for outer in walk(holder):
            for child in child_nodes(outer):
                self._parents[child] = outer

    def memo(self, key: object, compute):
        """Analysis shared by several rules is computed once per file."""
        value = self.cache.get(key, _MISSING)  # (one lookup on a hit: asked some 300k times a torch run)
        if value is _MISSING:
            value = self.cache[key] = compute()
        return value

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        while True:
            node = self.parent(node)
            if node is None:
                return
            yield node

    def lines_matching(self, pattern: "re.Pattern[str]") -> list[int]:
        """Sorted line numbers where ``pattern`` matches the source text (a cheap gate before walking)."""

        def compute() -> list[int]:
            if pattern is NOTHING:
                return []
            words = _word_alternation(pattern)
            if words is not None:
                return self._lines_of_words(*words)
            text, search, bounded = self.source, *_literal_first(pattern)
            offsets = (m.start() for m in search.finditer(text))
            if bounded:  # the leading ``\b`` of the pattern, tested after the search
                offsets = (at for at in offsets if not at or not _word_character(text[at - 1]))
            return sorted({bisect.bisect_right(self._line_starts, at) for at in offsets})

        return self.memo(("lines", pattern.pattern), compute)

    def _lines_of_words(self, words: tuple[str, ...], leading: bool, trailing: bool, called: bool) -> list[int]:
        """``lines_matching`` for a ``_word_alternation``: each word found by ``str.find``, which
        skips ahead by the word's length where ``re`` tries the alternation at every character."""
        text, found = self.source, set()
        for word in words:
            at = text.find(word)
            while at >= 0:
                end = at + len(word)
                if not (leading and at and _word_character(text[at - 1])) and not (trailing and end < len(text) and _word_character(text[end])) \
                        and not (called and _CALL.match(text, end) is None):
                    found.add(bisect.bisect_right(self._line_starts, at))
                at = text.find(word, at + 1)
        return sorted(found)

    def mentions(self, node: ast.AST, pattern: "re.Pattern[str]") -> bool:
        """True if ``pattern`` matches somewhere on the lines of ``node``."""
        lines = self.lines_matching(pattern)
        if isinstance(node, ast.Module):
            return bool(lines)
        index = bisect.bisect_left(lines, node.lineno)
        return index < len(lines) and lines[index] <= (node.end_lineno or node.lineno)

    def statement_of(self, node: ast.AST) -> ast.stmt:
        if isinstance(node, ast.stmt):
            return node
        for parent in self.ancestors(node):
            if isinstance(parent, ast.stmt):
                return parent
        raise ValueError("node outside any statement")

    def is_own_line(self, stmt: ast.stmt) -> bool:
        """True if ``stmt`` is alone on its lines (no ``a; b`` and no trailing code)."""
        start = self.offset(stmt.lineno, stmt.col_offset)
        end = self.offset(stmt.end_lineno, stmt.end_col_offset)
        before = self.source[self.line_start(stmt.lineno) : start]
        after = self.source[end : self.line_end(stmt.end_lineno)]
        return not before.strip() and (not after.strip() or after.strip().startswith("#"))


STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers")  # (a match's cases have no position)


def _statement_holding(node: ast.AST, start: tuple[int, int], end: tuple[int, int]) -> Optional[ast.AST]:
    """The statement (or ``except`` clause) directly under ``node`` whose span holds start..end."""
    for name in STATEMENT_LISTS:
        for child in getattr(node, name, None) or ():
            if (child.lineno, child.col_offset) <= start and end <= (child.end_lineno, child.end_col_offset):
                return child
    return None
