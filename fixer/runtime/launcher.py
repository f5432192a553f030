"""Running the user's program as ``python SCRIPT ARGS...`` (or ``python -m MODULE``) would, in
this interpreter, with the sanitizer on; the outcome is the findings and the exit code."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
import types
from dataclasses import dataclass, field
from typing import Optional, TextIO

from fixer.runtime import stopping
from fixer.runtime.exits import program_exit_as_exception
from fixer.runtime.report import Finding
from fixer.runtime.session import Session
from fixer.runtime.sites import stop_at
from fixer.runtime.stopping import StopRun


@dataclass
class Outcome:
    findings: list[Finding]
    exit_code: int  # the program's own: 0, its sys.exit(n), 1 for an uncaught exception
    steps: int
    stopped: bool = False  # --max-steps ended the run
    failures: list[str] = field(default_factory=list)  # our own diagnosis crashes
    iterations: int = 0  # training iterations begun (fixer.runtime.session)
    interrupted: bool = False  # Ctrl-C ended the program
    graded: frozenset = frozenset()  # parameters that got a gradient at some step (fixer.runtime.gradients; --fix only)
    graded_lately: frozenset = frozenset()  # ... at the latest steps of each optimizer
    nonfinite: bool = False  # a step saw a NaN or infinite gradient
    direct: frozenset = frozenset()  # parameters a loss reached through its own iteration's nodes
    orphans: frozenset = frozenset()  # ... those no nn.Module holds
    used: dict = field(default_factory=dict)  # backward line -> parameters an optimizer stepped with its gradient (fixer.runtime.flows)
    through: dict = field(default_factory=dict)  # backward line -> parameters it reached through a probe's marked value
    beside: dict = field(default_factory=dict)  # backward line -> parameters it reached other than through it


def execute(
    target: str, args: list[str], module: bool = False, max_steps: Optional[int] = None, stderr: Optional[TextIO] = None,
    gradients: bool = False,
) -> Outcome:
    """Run the script at ``target`` (or the module named ``target``); ``sys.argv``, ``sys.path``,
    ``__main__`` and the current folder are restored afterwards. ``gradients``: record which
    parameters each step trained."""
    stderr = stderr or sys.stderr
    saved_argv, saved_path, saved_cwd = sys.argv[:], sys.path[:], os.getcwd()
    session = Session(max_steps, whole_program=True, gradients=gradients)
    code, stopped, interrupted = 0, False, False
    try:
        if module:
            sys.argv = [target, *args]
            sys.path.insert(0, os.getcwd())
        else:
            sys.argv = [target, *args]
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        with session, program_exit_as_exception():
            if module:
                names = runpy.run_module(target, run_name="__main__", alter_sys=True)
            elif os.path.isfile(target):
                names = _run_script(target)
            else:  # a folder or zip file holding __main__.py
                names = runpy.run_path(os.path.abspath(target), run_name="__main__")
            session.recorder.program_globals = names  # the leak sampler's last look
    except StopRun:
        stopped = True
    except SystemExit as exc:
        code = _exit_code(exc.code, stderr)
    except BaseException as exc:  # the program's own error, reported as Python would
        interrupted = isinstance(exc, KeyboardInterrupt)
        code = _program_error(exc, session, stderr)
    finally:
        stopping.release()
        sys.argv[:], sys.path[:] = saved_argv, saved_path
        os.chdir(saved_cwd)  # the program's chdir must not move the report's paths or the re-run
    outcome = Outcome(session.findings, code, session.steps, stopped, session.failures, session.iterations, interrupted)
    if session.gradients is not None:
        trained = session.gradients
        outcome.graded, outcome.graded_lately, outcome.nonfinite = frozenset(trained.ever), frozenset(trained.latest()), trained.nonfinite
        outcome.direct, outcome.orphans = frozenset(trained.direct), frozenset(trained.orphans())
        outcome.used, outcome.through, outcome.beside = trained.flows.used, trained.flows.through, trained.flows.beside
    return outcome


stop_at(execute.__code__)  # the stack walks of every recorded op end here


def _run_script(target: str) -> dict:
    """As ``python SCRIPT`` runs it: ``sys.argv[0]`` as typed (runpy would make it absolute),
    ``__file__`` and the code's file name absolute, as Python 3.9+ gives them. The globals."""
    path = os.path.abspath(target)
    with open(path, "rb") as handle:  # (compile reads the coding cookie)
        code = compile(handle.read(), path, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __loader__=None, __spec__=None, __package__=None)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        exec(code, main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved
    return main.__dict__


def _exit_code(code: object, stderr: TextIO) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=stderr)  # sys.exit("message") prints it and exits 1, as Python does
    return 1


def _program_error(exc: BaseException, session: Session, stderr: TextIO) -> int:
    """The program's traceback as Python prints it, without graphfix's frames; then, when a finding
    explains this very error, a line saying the diagnosis follows (the call stack stays there)."""
    interrupted = isinstance(exc, KeyboardInterrupt)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _ours(f.filename)]
    print("Traceback (most recent call last):", file=stderr)
    print("".join(traceback.format_list(frames)), end="", file=stderr)
    print("".join(traceback.format_exception_only(type(exc), exc)), end="", file=stderr)
    if any(f.error for f in session.findings) and not interrupted:
        print(f"graphfix run: graphfix's diagnosis of this {type(exc).__name__} follows", file=stderr)
    return 130 if interrupted else 1


def _ours(filename: str) -> bool:
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.abspath(filename).startswith(here + os.sep) or "runpy" in filename
