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
_is_library: dict[CodeType, bool] = {}
_outermost: set[CodeType] = set()  # frames above which nothing is the user's (graphfix run's launcher)


def stop_at(code: CodeType) -> None:
    _outermost.add(code)


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


def is_user_code(code: CodeType) -> bool:
    lib = _is_library.get(code)
    if lib is None:
        lib = _is_library[code] = _library(code.co_filename)
    return not lib


def user_stack(frame: Optional[FrameType]) -> Stack:
    """The user frames from ``frame`` outward, innermost first (at most USER_FRAMES)."""
    found = []
    library, outermost = _is_library, _outermost
    while frame is not None:
        code = frame.f_code
        if code in outermost:
            break
        lib = library.get(code)
        if lib is None:
            lib = library[code] = _library(code.co_filename)
        if not lib:
            found.append((code, frame.f_lineno))
            if len(found) == USER_FRAMES:
                break
        frame = frame.f_back
    return tuple(found)


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
