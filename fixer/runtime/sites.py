"""Where in the user's code something happens: the user frames of the current stack.

A frame is the user's when its file lies outside the installed libraries (stdlib, site-packages,
torch) and outside graphfix itself. A stack is a tuple of ``(code, line)``, innermost first."""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
from types import CodeType, FrameType
from typing import Optional

Stack = tuple[tuple[CodeType, int], ...]
USER_FRAMES = 6  # user frames kept per stack: enough to tell a helper's callers apart

_HERE = os.path.dirname(os.path.abspath(__file__))
_library_dirs: tuple[str, ...] = ()
# Keyed by id(code), the code kept in the value so the id stays its own: hashing a code object
# hashes its contents, every time, and these are asked once per recorded op.
_is_library: dict[int, tuple[CodeType, bool]] = {}
_outermost: dict[int, CodeType] = {}  # frames above which nothing is the user's (graphfix run's launcher)
_interned: dict[tuple, Stack] = {}  # (id(code), line, ...) -> the one stack for those frames


def stop_at(code: CodeType) -> None:
    _outermost[id(code)] = code


def add_library_dir(path: str) -> None:
    global _library_dirs
    _library_dirs = tuple(sorted({*_library_dirs, os.path.abspath(path) + os.sep}))


for _key in ("stdlib", "platstdlib", "purelib", "platlib"):
    add_library_dir(sysconfig.get_paths()[_key])
add_library_dir(_HERE)


def _library(filename: str) -> bool:
    if filename.startswith("<"):
        return True  # frozen modules, <string>: not a line the user can open
    return os.path.abspath(filename).startswith(_library_dirs)


def is_user_file(filename: str) -> bool:
    return not _library(filename)


def is_user_code(code: CodeType) -> bool:
    entry = _is_library.get(id(code))
    if entry is None:
        entry = _is_library[id(code)] = (code, _library(code.co_filename))
    return not entry[1]


def user_stack(frame: Optional[FrameType]) -> Stack:
    """The user frames from ``frame`` outward, innermost first (at most USER_FRAMES). Equal
    stacks are one object (interned), so ``id(stack)`` is a cheap key."""
    codes, key = [], []
    library, outermost = _is_library, _outermost
    while frame is not None:
        code = frame.f_code
        ident = id(code)
        if ident in outermost:
            break
        entry = library.get(ident)
        if entry is None:
            entry = library[ident] = (code, _library(code.co_filename))
        if not entry[1]:
            codes.append(code)
            key += (ident, frame.f_lineno)
            if len(codes) == USER_FRAMES:
                break
        frame = frame.f_back
    key = tuple(key)
    stack = _interned.get(key)
    if stack is None:
        stack = _interned[key] = tuple(zip(codes, key[1::2]))
    return stack


def caller_stack(depth: int = 1) -> Stack:
    return user_stack(sys._getframe(depth + 1))


def source_line(code: CodeType, line: int) -> str:
    return linecache.getline(code.co_filename, line).strip()


def divergence(first: Stack, second: Stack) -> tuple[int, int]:
    """Indexes (innermost-first) into each stack of the outermost frame where they part: the
    level at which a reader sees both places, e.g. ``fake = G(z)`` and ``D(fake)`` in one loop."""
    a, b = first[::-1], second[::-1]
    level = 0
    while level < min(len(a), len(b)) - 1 and a[level] == b[level]:
        level += 1
    return max(len(first) - 1 - level, 0), max(len(second) - 1 - level, 0)
