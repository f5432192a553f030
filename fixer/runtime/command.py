"""``graphfix run [--max-steps N] [--output-format text|json] [--output FILE] [--diff | --fix] (SCRIPT | -m MODULE) [ARGS...]``.

The program runs in this interpreter, as ``python SCRIPT ARGS...`` would run it (``__main__``,
``sys.argv``, ``sys.path[0]``), with the sanitizer on; everything after SCRIPT or -m MODULE is
the program's (fixer.runtime.arguments). Exit codes: 1 when a finding was reported (the
program's own code, when not 0, is then named on stderr); otherwise the program's own (0, its
``sys.exit(n)`` or ``os._exit(n)``, 1 for an uncaught exception, whose traceback is printed as
Python prints it); 130 when Ctrl-C stopped the program or graphfix; 0 when ``--max-steps``
stopped it; 123 when graphfix itself cannot run it (no such script or module, torch missing,
bad options) or cannot write a fix. With ``--fix`` (as static ``graphfix --fix``): 0 when every
finding was repaired and the re-runs proved it (fixer.runtime.repair), 1 when a finding remains (no
candidate repair applies, the file lies outside the program's project, or no re-run proved a
candidate and the files were put back). ``--diff`` tries the candidates as ``--fix`` does, prints
the proven repair's diff and puts the files back."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

from fixer.runtime import TorchMissing, require_torch
from fixer.runtime.arguments import parse, parser
from fixer.runtime.run_output import line_end, stdout_to_stderr, summary, write_report

EXIT_FINDINGS, EXIT_ERROR, EXIT_INTERRUPTED = 1, 123, 130
MIN_RERUN_SECONDS, RERUN_FACTOR = 60.0, 10.0  # the re-run's default limit: 10 times the first run, at least 60 s


def main(argv: list[str]) -> int:
    try:
        options = parse(argv)
    except SystemExit as exc:  # --help (0) or a usage error
        return 0 if exc.code in (0, None) else EXIT_ERROR
    if options.module is None and not options.target:
        parser().print_usage(sys.stderr)
        print("graphfix run: error: give a SCRIPT or -m MODULE", file=sys.stderr)
        return EXIT_ERROR
    if options.max_steps is not None and options.max_steps < 1:
        print("graphfix run: error: --max-steps must be 1 or more", file=sys.stderr)
        return EXIT_ERROR
    if options.rerun_timeout is not None and not options.rerun_timeout > 0:
        print("graphfix run: error: --rerun-timeout must be more than 0", file=sys.stderr)
        return EXIT_ERROR
    if options.module is None and not os.path.isfile(options.target[0]):
        print(f"graphfix run: error: {options.target[0]}: no such file", file=sys.stderr)
        return EXIT_ERROR
    try:
        require_torch()
    except TorchMissing as exc:
        print(f"graphfix run: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if options.module is not None and not _module_exists(options.module):
        print(f"graphfix run: error: no module named {options.module!r}", file=sys.stderr)
        return EXIT_ERROR
    try:
        return _run(options)
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM during --fix) after the program: the files are as they were
        print("graphfix run: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _fix(options: argparse.Namespace, outcome, proposals: list, started: tuple[str, float], project) -> int:
    from fixer.runtime.repair.report import say
    from fixer.runtime.repair.trial import repair
    from fixer.runtime.rerun import sigterm_as_interrupt, subprocess_rerun

    cwd, seconds = started
    module = options.module is not None
    target, args = (options.module, options.target) if module else (os.path.join(cwd, options.target[0]), options.target[1:])
    limit = options.rerun_timeout or max(MIN_RERUN_SECONDS, RERUN_FACTOR * seconds)
    keep = bool(options.fix)
    with sigterm_as_interrupt():
        result = repair(outcome, proposals, lambda steps: subprocess_rerun(target, args, module, steps, cwd, limit), options.max_steps, project.holds, keep)
    for diff in result.diffs if not keep else ():
        sys.stdout.write(diff)
    for line in say(result, outcome, proposals, options.max_steps, keep):
        print(f"graphfix run: {line}", file=sys.stderr)
    if result.error:
        return EXIT_ERROR
    return 0 if result.kept and keep else EXIT_FINDINGS


def _module_exists(name: str) -> bool:
    """As ``python -m`` looks it up (from the current folder); a parent package is imported."""
    sys.path.insert(0, os.getcwd())
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
    finally:
        sys.path.remove(os.getcwd())


def _run(options: argparse.Namespace) -> int:
    from fixer.runtime.launcher import execute
    from fixer.runtime.project import Project

    module = options.module is not None
    target, args = (options.module, options.target) if module else (options.target[0], options.target[1:])
    cwd, began = os.getcwd(), time.monotonic()
    with stdout_to_stderr(options.output_format == "json" and options.output is None), line_end(sys.stdout) as last_line:
        outcome = execute(target, args, module, options.max_steps, gradients=bool(options.fix or options.diff or options.summary))
    seconds = time.monotonic() - began
    if outcome.stopped:
        print(f"graphfix run: stopped after {outcome.steps} optimizer step(s) (--max-steps)", file=sys.stderr)
    sys.stdout.flush()
    unwritten = write_report(outcome.findings, options.output_format, options.output, last_line.unfinished)
    for failure in outcome.failures:
        print(f"graphfix run: internal error while diagnosing: {failure}", file=sys.stderr)
    print(summary(target, module, outcome, options.output), file=sys.stderr)
    if unwritten:
        print(f"graphfix run: error: {unwritten}", file=sys.stderr)
        return EXIT_ERROR
    if options.summary:
        from fixer.runtime.verify import write_summary

        write_summary(options.summary, outcome)
    if outcome.findings and outcome.exit_code != 0:
        print(f"graphfix run: the program's own exit code was {outcome.exit_code}", file=sys.stderr)
    if outcome.interrupted:  # Ctrl-C: report what was seen, change nothing
        return EXIT_INTERRUPTED
    if outcome.findings and (options.diff or options.fix):
        from fixer.runtime.static_fix import inside, propose

        proposals = propose(outcome.findings)
        project = Project(cwd if module else os.path.dirname(os.path.abspath(target)))
        return _fix(options, outcome, inside(proposals, project), (cwd, seconds), project)
    return EXIT_FINDINGS if outcome.findings else outcome.exit_code
