"""``graphfix run [--max-steps N] [--output-format text|json] [--output FILE] [--diff | --fix] (SCRIPT | -m MODULE) [ARGS...]``.

The program runs in this interpreter, as ``python SCRIPT ARGS...`` would run it (``__main__``,
``sys.argv``, ``sys.path[0]``), with the sanitizer on. Exit codes: 1 when a finding was reported;
otherwise the program's own (0, its ``sys.exit(n)``, 1 for an uncaught exception, whose
traceback is printed as Python prints it); 0 when ``--max-steps`` stopped it; 123 when graphfix
itself cannot run it (no such script or module, torch missing, bad options) or cannot write a
fix. With ``--fix`` (as static ``graphfix --fix``): 0 when every finding was fixed and the re-run
proved it (fixer.runtime.verify), 1 when a finding remains (no rule could write its edit, or the
re-run did not prove the fix and the files were put back)."""

from __future__ import annotations

import argparse
import os
import sys
from fixer.runtime import TorchMissing, require_torch
from fixer.runtime.run_output import stdout_to_stderr, summary, write_report

EXIT_FINDINGS, EXIT_ERROR = 1, 123


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphfix run",
        description="Run a PyTorch program with the autograd sanitizer on; report graph-lifetime bugs as they happen.",
    )
    parser.add_argument("--max-steps", type=int, default=None, metavar="N", help="stop cleanly after N optimizer steps")
    parser.add_argument("--output-format", choices=("text", "json"), default="text",
                        help="json on stdout: the program's own stdout goes to stderr while it runs")
    parser.add_argument("--output", default=None, metavar="FILE", help="write the findings to FILE, not stdout")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true", help="also print the fix a rule writes from the run's evidence")
    mode.add_argument("--fix", action="store_true", help="apply that fix, re-run the program to verify it, roll it back if the re-run fails")
    parser.add_argument("--summary", default=None, help=argparse.SUPPRESS)  # the re-run's figures, for --fix
    parser.add_argument("-m", dest="module", default=None, metavar="MODULE", help="run a module, as python -m")
    parser.add_argument("target", nargs=argparse.REMAINDER, help="SCRIPT [ARGS...] (or, with -m, the module's ARGS)")
    return parser


def main(argv: list[str]) -> int:
    parser = _parser()
    try:
        options = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error
        return 0 if exc.code in (0, None) else EXIT_ERROR
    if options.module is None and not options.target:
        parser.print_usage(sys.stderr)
        print("graphfix run: error: give a SCRIPT or -m MODULE", file=sys.stderr)
        return EXIT_ERROR
    if options.max_steps is not None and options.max_steps < 1:
        print("graphfix run: error: --max-steps must be 1 or more", file=sys.stderr)
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
    return _run(options)


def _print_diffs(proposals: list) -> None:
    for proposal in proposals:
        sys.stdout.write(proposal.diff)
        for words in proposal.advice:
            print(f"graphfix run: {words}", file=sys.stderr)


def _fix(options: argparse.Namespace, outcome, proposals: list, target: str, args: list[str]) -> int:
    from fixer.diff import display_path
    from fixer.runtime.verify import apply_and_verify, subprocess_rerun

    for proposal in proposals:
        for words in proposal.advice:
            print(f"graphfix run: {words}", file=sys.stderr)
    if not any(p.fixed is not None for p in proposals):
        return EXIT_FINDINGS
    rerun = subprocess_rerun(target, args, options.module is not None, options.max_steps)
    kept, what = apply_and_verify(proposals, outcome, rerun)
    files = ", ".join(display_path(p.filename) for p in proposals if p.fixed is not None)
    codes = ", ".join(sorted({f.code for p in proposals for f in p.answered}))
    print(f"graphfix run: {'fixed' if kept else 'not fixed'} {files} ({codes}): {what}", file=sys.stderr)
    if not kept and what.startswith("cannot write"):
        return EXIT_ERROR
    return 0 if kept and all(not p.advice for p in proposals) else EXIT_FINDINGS


def _module_exists(name: str) -> bool:
    """As ``python -m`` looks it up (from the current folder); a parent package is imported."""
    import importlib.util

    sys.path.insert(0, os.getcwd())
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
    finally:
        sys.path.remove(os.getcwd())


def _run(options: argparse.Namespace) -> int:
    from fixer.runtime.launcher import execute

    module = options.module is not None
    target, args = (options.module, options.target) if module else (options.target[0], options.target[1:])
    with stdout_to_stderr(options.output_format == "json" and options.output is None):
        outcome = execute(target, args, module, options.max_steps)
    if outcome.stopped:
        print(f"graphfix run: stopped after {outcome.steps} optimizer step(s) (--max-steps)", file=sys.stderr)
    sys.stdout.flush()
    unwritten = write_report(outcome.findings, options.output_format, options.output)
    for failure in outcome.failures:
        print(f"graphfix run: internal error while diagnosing: {failure}", file=sys.stderr)
    print(summary(target, module, outcome, options.output), file=sys.stderr)
    if unwritten:
        print(f"graphfix run: error: {unwritten}", file=sys.stderr)
        return EXIT_ERROR
    if options.summary:
        from fixer.runtime.verify import write_summary

        write_summary(options.summary, outcome)
    if outcome.findings and (options.diff or options.fix):
        from fixer.runtime.static_fix import propose

        proposals = propose(outcome.findings)
        if options.fix:
            return _fix(options, outcome, proposals, target, args)
        _print_diffs(proposals)
    return EXIT_FINDINGS if outcome.findings else outcome.exit_code
