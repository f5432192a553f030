"""``os._exit(n)`` in the program under ``graphfix run``: the run must still end with a report
and the program's code, so in the program's own process and main thread it raises
``ProgramExit(n)`` (a ``SystemExit``) instead of ending the interpreter at once. Forked
children (DataLoader workers, multiprocessing) and other threads get the real ``os._exit``."""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator


class ProgramExit(SystemExit):
    """The program called ``os._exit(code)``."""


@contextlib.contextmanager
def program_exit_as_exception() -> Iterator[None]:
    real, pid = os._exit, os.getpid()

    def _exit(code: int) -> None:
        if os.getpid() == pid and threading.current_thread() is threading.main_thread():
            raise ProgramExit(code)
        real(code)

    os._exit = _exit
    try:
        yield
    finally:
        os._exit = real
