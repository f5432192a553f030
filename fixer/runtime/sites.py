"""Where in the user's code something happens: the user frames of the current stack.

A frame is the user's when its file lies outside the installed libraries (stdlib, site-packages,
torch) and outside graphfix itself. A stack is a tuple of ``(code, line)``, innermost first."""

from __future__ import annotations

import inspect
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
# hashes its contents, every time, and these are asked once per recorded op. The kind: USER,
# LIBRARY, or OUTERMOST (graphfix run's launcher: nothing above it is the user's).
USER, LIBRARY, OUTERMOST = 0, 1, 2
_kinds: dict[int, tuple[CodeType, int]] = {}
_outermost: dict[int, CodeType] = {}
_interned: dict[tuple, Stack] = {}  # (id(code), line, ...) -> the one stack for those frames
_at: dict[tuple, Stack] = {}  # (id(code), f_lasti, ...) -> the interned stack: no line number computed
# The second user frame of a recorded op's stack (held, so its id stays its own) -> its table:
# (id(code), f_lasti) of the innermost user frame, with its own f_lasti -> the interned stack.
_above: dict[int, tuple[FrameType, dict]] = {}
_outermost_table: dict[tuple, Stack] = {}  # the same for a stack of one user frame
ABOVE = 64  # frames held at most
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def stop_at(code: CodeType) -> None:
    _outermost[id(code)] = code
    _kinds[id(code)] = (code, OUTERMOST)
    _outermost_table.clear()
    _above.clear()


def add_library_dir(path: str) -> None:
    global _library_dirs
    _library_dirs = tuple(sorted({*_library_dirs, os.path.abspath(path) + os.sep}))
    _outermost_table.clear()
    _above.clear()


for _key in ("stdlib", "platstdlib", "purelib", "platlib"):
    add_library_dir(sysconfig.get_paths()[_key])
add_library_dir(_HERE)


def _library(filename: str) -> bool:
    if filename.startswith("<"):
        return True  # frozen modules, <string>: not a line the user can open
    return os.path.abspath(filename).startswith(_library_dirs)


def is_user_file(filename: str) -> bool:
    return not _library(filename)


def _kind(code: CodeType) -> int:
    entry = _kinds.get(id(code))
    if entry is None:
        kind = OUTERMOST if id(code) in _outermost else LIBRARY if _library(code.co_filename) else USER
        entry = _kinds[id(code)] = (code, kind)
    return entry[1]


def is_user_code(code: CodeType) -> bool:
    return _kind(code) == USER


def user_stack(frame: Optional[FrameType]) -> Stack:
    """The user frames from ``frame`` outward, innermost first (at most USER_FRAMES). Equal
    stacks are one object (interned), so ``id(stack)`` is a cheap key. Run for every recorded op,
    so it walks only up to the second user frame: what lies above that one is fixed while it is
    alive (it waits on the call below it), so its table (``_above``) answers for the rest."""
    kinds, start, inner = _kinds, frame, None
    while frame is not None:
        entry = kinds.get(id(frame.f_code))
        kind = _kind(frame.f_code) if entry is None else entry[1]
        if kind == USER:
            if inner is not None:
                break
            inner = frame
        elif kind == OUTERMOST:
            frame = None
            break
        frame = frame.f_back
    if inner is None:
        return ()
    key = (id(inner.f_code), inner.f_lasti)
    if frame is None:
        table = _outermost_table
    else:
        held = _above.get(id(frame))
        if held is None or held[0] is not frame:
            if frame.f_code.co_flags & _RESUMABLE:  # a generator's callers change at each resumption
                return _walked(start)
            if len(_above) >= ABOVE:
                _above.clear()
            held = _above[id(frame)] = (frame, {})
        table, key = held[1], (*key, frame.f_lasti)
    stack = table.get(key)
    if stack is None:
        stack = table[key] = _walked(start)
    return stack


def forget_frames() -> None:
    """Drop the frames ``_above`` holds (at each backward and step, and at the end of a run):
    one that returned meanwhile must not keep its locals alive much longer."""
    _above.clear()


def _walked(frame: Optional[FrameType]) -> Stack:
    """The whole walk: keyed on each user frame's instruction (``f_lasti``, read as is), line
    numbers (a search of the line table) computed only for a place not met before."""
    key: list = []
    kinds, start = _kinds, frame
    while frame is not None:
        code = frame.f_code
        entry = kinds.get(id(code))
        kind = _kind(code) if entry is None else entry[1]
        if kind == USER:
            key.append(id(code))
            key.append(frame.f_lasti)
            if len(key) == 2 * USER_FRAMES:
                break
        elif kind == OUTERMOST:
            break
        frame = frame.f_back
    at = tuple(key)
    stack = _at.get(at)
    if stack is None:
        stack = _at[at] = _by_line(start, len(key) // 2)
    return stack


def _by_line(frame: Optional[FrameType], count: int) -> Stack:
    """The interned stack of the first ``count`` user frames from ``frame`` outward."""
    frames = []
    while frame is not None and len(frames) < count:
        if _kind(frame.f_code) == USER:
            frames.append((frame.f_code, frame.f_lineno))
        frame = frame.f_back
    key = tuple(x for code, line in frames for x in (id(code), line))
    stack = _interned.get(key)
    if stack is None:
        stack = _interned[key] = tuple(frames)
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
