"""Running analysis on deeply nested code that CPython accepts.

The analysis walks the tree recursively, which is short and clear for real code, but a file with
1,000 ``elif`` branches or a 1,000-term sum, which CPython compiles, goes past Python's default
recursion limit. Such a rule call is run again in a thread with a large stack and a high limit:
the common case pays nothing, and the deepest tree the parser builds is analysed in full."""

from __future__ import annotations

import sys
import threading
from typing import Callable, TypeVar

T = TypeVar("T")

DEEP_STACK_BYTES = 512 * 1024 * 1024  # reserved address space; only the pages used are touched
DEEP_RECURSION_LIMIT = 200_000


def call_with_deep_stack(function: Callable[..., T], *args: object) -> T:
    """``function(*args)`` in a thread whose stack and recursion limit fit any tree ``ast`` builds."""
    outcome: dict[str, object] = {}

    def target() -> None:
        previous = sys.getrecursionlimit()
        sys.setrecursionlimit(max(previous, DEEP_RECURSION_LIMIT))
        try:
            outcome["value"] = function(*args)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc
        finally:
            sys.setrecursionlimit(previous)

    previous_size = threading.stack_size(DEEP_STACK_BYTES)
    try:
        worker = threading.Thread(target=target, name="graphfix-deep")
        worker.start()
    finally:
        threading.stack_size(previous_size)
    worker.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
