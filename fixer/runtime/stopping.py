"""Ending a run at ``--max-steps`` even where the program swallows the stop.

``StopRun`` is raised out of ``optimizer.step()``; it is not an ``Exception``, but a bare
``except:`` (or ``except BaseException``) still catches it, and a loop around such a handler
would run on forever. When a step comes after the stop was raised, the stop insists: a trace
function raises ``StopRun`` again at every line the program's own code runs, its handlers'
lines included, so the stop climbs out of every handler to the launcher, which releases it."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any, Optional

from fixer.runtime.sites import is_user_code


class StopRun(BaseException):
    """Raised out of ``optimizer.step()`` once ``--max-steps`` steps ran: not an ``Exception``,
    so the program's own ``except Exception`` does not swallow it."""


_previous: list[Any] = []  # the trace function the program had before the stop insisted
_frames: list[tuple[FrameType, Any, bool]] = []  # frames given our trace: (frame, its own, its f_trace_lines)


def _raise_in_user_code(frame: FrameType, event: str, arg: Any) -> Optional[Any]:
    if not _previous or not is_user_code(frame.f_code):
        return None  # released; or graphfix's and the libraries' own lines, which run undisturbed
    if event == "line":
        raise StopRun("--max-steps")
    return _raise_in_user_code


def insist() -> None:
    """From now on, every line of the program's code raises ``StopRun`` (this thread)."""
    if not _previous:
        _previous.append(sys.gettrace())
    sys.settrace(_raise_in_user_code)
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None:  # frames already running trace only when told to
        if is_user_code(frame.f_code) and frame.f_trace is not _raise_in_user_code:
            _frames.append((frame, frame.f_trace, frame.f_trace_lines))
            frame.f_trace, frame.f_trace_lines = _raise_in_user_code, True
        frame = frame.f_back


def release() -> None:
    """The run has ended: the program's own trace functions (a debugger's, coverage's) are back."""
    if _previous:
        sys.settrace(_previous.pop())
    while _frames:
        frame, trace, lines = _frames.pop()
        frame.f_trace, frame.f_trace_lines = trace, lines
