"""A warning torch raises inside a recorded call names the program's line, not graphfix's.

torch warns from C++ at the innermost Python frame, which under the sanitizer is the recording
mode's ``__torch_function__``: every such warning would point at ``fixer/runtime/recorder.py``.
While a session runs, ``warnings.showwarning`` moves such a warning to the innermost frame of
the program's own code (the line plain Python would name)."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any, Iterator

from fixer.runtime.sites import user_stack

_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep


@contextlib.contextmanager
def at_user_lines() -> Iterator[None]:
    previous = warnings.showwarning

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        if os.path.abspath(filename).startswith(_OURS):
            stack = user_stack(sys._getframe(1))
            if stack:
                code, lineno = stack[0]
                filename, line = code.co_filename, None
        previous(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    try:
        yield
    finally:
        if warnings.showwarning is show:  # (the program may have put its own in meanwhile)
            warnings.showwarning = previous
