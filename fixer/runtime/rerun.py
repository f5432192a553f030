"""The re-run of ``graphfix run --fix``: the fixed program in a fresh interpreter (the fixed
modules are imported anew), in a process group of its own, from the folder graphfix was started
in, with the script's absolute path (the program may have changed folder), under a time limit.
The whole group (the program's DataLoader workers too) is killed when the limit passes or when
graphfix is interrupted (Ctrl-C, or SIGTERM, which is raised as ``Interrupted``): no re-run
outlives graphfix, and the caller's ``finally`` puts the files back."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Iterator, Optional

import fixer
from fixer.runtime.verify import Rerun, Summary

OUTPUT_TAIL = 2000  # characters of the re-run's output shown when it fails
# this graphfix, not another one the program's environment would find
_OURS = os.path.dirname(os.path.dirname(os.path.abspath(fixer.__file__)))


class Interrupted(KeyboardInterrupt):
    """SIGTERM during ``--fix``, raised as Ctrl-C is, so that the same clean-up runs."""


def _raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(f"signal {signum}")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # (signal handlers belong to the main thread)
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def subprocess_rerun(target: str, args: list[str], module: bool, max_steps: Optional[int], cwd: str, timeout: float) -> Rerun:
    """``target``: the module's name, or the script's absolute path."""

    def rerun() -> Summary:
        handle, summary = tempfile.mkstemp(prefix="graphfix-run-", suffix=".json")
        os.close(handle)
        command = [sys.executable, "-m", "fixer", "run", "--summary", summary]
        command += ["--max-steps", str(max_steps)] if max_steps is not None else []
        command += ["-m", target, *args] if module else ["--", target, *args]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (_OURS, os.environ.get("PYTHONPATH")) if p)}
        try:
            output, code, killed = _run_group(command, cwd, env, timeout)
            try:
                with open(summary, encoding="utf-8") as file:
                    figures = json.load(file)
            except (OSError, ValueError):  # it died (or was killed) before writing its figures
                figures = {}
            if killed or not isinstance(figures, dict):
                return Summary(code or 1, 0, 0, 0, False, output, timed_out=timeout if killed else None)
            try:
                return Summary(**{**figures, "output": output})
            except TypeError:
                return Summary(code or 1, 0, 0, 0, False, output)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(summary)

    return rerun


def _run_group(command: list[str], cwd: str, env: dict, timeout: float) -> tuple[str, int, bool]:
    """(the tail of stdout and stderr, the exit code, whether the time limit killed it)."""
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    killed = False
    try:
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            killed = True
            _kill_group(process)
            output, _ = process.communicate()
    except BaseException:  # interrupted: the re-run must not outlive us
        _kill_group(process)
        process.wait()
        raise
    finally:
        _kill_group(process)  # what the program left behind (its own children) ends with it
    text = output.decode("utf-8", "replace")[-OUTPUT_TAIL:]
    return text, process.returncode, killed


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
