"""Run programs under ``graphfix run``'s sanitizer in worker processes that import torch once.

Each program runs as ``graphfix run PROGRAM`` would (``fixer.runtime.launcher.execute``), from
its own folder, seeds reset, output captured; the result is plain data for the tests."""

from __future__ import annotations

import contextlib
import io
import linecache
import multiprocessing
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from fixer.runtime import fill_site


@dataclass(frozen=True)
class Sanitized:
    path: str
    exit_code: int
    findings: tuple  # (code, line, ((role, line), ...)) per finding
    failures: tuple  # graphfix's own diagnosis crashes
    output: str
    steps: int = 0
    stopped: bool = False


def _init() -> None:
    import torch

    torch.set_num_threads(1)


def execute_quietly(path: str, args: tuple = (), max_steps: Optional[int] = None, gradients: bool = False):
    """``graphfix run PATH ARGS`` from the program's folder, seeds reset: (Outcome, its output).
    ``gradients``: record the parameters trained, as ``graphfix run --fix`` does."""
    import torch

    from fixer.runtime.launcher import execute

    linecache.checkcache()  # (a program fixed since this worker last read it: a fresh process would read it anew)
    fill_site._tree.cache_clear()

    torch.manual_seed(0)
    random.seed(0)
    buffer, cwd = io.StringIO(), os.getcwd()
    folder = os.path.dirname(os.path.abspath(path))
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            return execute(path, list(args), max_steps=max_steps, stderr=buffer, gradients=gradients), buffer
    finally:
        os.chdir(cwd)
        _forget_modules_of(folder)


def _forget_modules_of(folder: str) -> None:
    """The program's own modules (``helpers``, ``project.steps``) leave ``sys.modules`` with it:
    the next program in this worker may have its own module of that name, as a fresh
    ``graphfix run`` process would find."""
    import sys

    inside = folder.rstrip(os.sep) + os.sep
    for name, module in list(sys.modules.items()):
        places = [getattr(module, "__file__", None) or ""]
        try:  # a package's folders (a namespace package has no file)
            places += [str(p) for p in getattr(module, "__path__", None) or ()]
        except TypeError:  # an object that only looks like a module (torch.classes)
            pass
        if any(place.startswith(inside) for place in places):
            del sys.modules[name]


def sanitize(path: str, args: tuple = (), max_steps: Optional[int] = None) -> Sanitized:
    path = str(Path(path).resolve())
    outcome, buffer = execute_quietly(path, args, max_steps)
    findings = tuple((f.code, f.line, tuple((p.role, p.line) for p in f.evidence)) for f in outcome.findings)
    return Sanitized(path, outcome.exit_code, findings, tuple(outcome.failures), buffer.getvalue()[-3000:], outcome.steps, outcome.stopped)


class Pool:
    def __init__(self, workers: int = min(2, os.cpu_count() or 1)) -> None:
        self._pool = multiprocessing.get_context("spawn").Pool(workers, initializer=_init)
        self._jobs: dict = {}

    def submit(self, paths: Iterable) -> None:
        for path in paths:
            if str(path) not in self._jobs:
                self._jobs[str(path)] = self._pool.apply_async(sanitize, (str(path),))

    def run(self, path, timeout: float = 120.0) -> Sanitized:
        self.submit([path])
        return self._jobs[str(path)].get(timeout)

    def close(self) -> None:
        self._pool.terminate()
        self._pool.join()
