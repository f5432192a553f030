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


def _raise_in_user_code(frame: FrameType, event: str, arg: Any) -> Optional[Any]:
    if not is_user_code(frame.f_code):
        return None  # graphfix's and the libraries' own lines run undisturbed
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
        if is_user_code(frame.f_code):
            frame.f_trace = _raise_in_user_code
            frame.f_trace_lines = True
        frame = frame.f_back


def release() -> None:
    """The run has ended: the program's own trace function (if any) is back."""
    if _previous:
        sys.settrace(_previous.pop())
