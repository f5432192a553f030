"""``graphfix run``'s command line, read as python reads its own: graphfix's options, then
``SCRIPT`` or ``-m MODULE``; everything after that is the program's, untouched (``--epochs 3``,
``-v``, ``--fix``, a literal ``--`` after ``-m MODULE`` as ``python -m`` passes it). A ``--``
before the script ends graphfix's options (a script whose name starts with ``-``)."""

from __future__ import annotations

import argparse

VALUED = ("--max-steps", "--output-format", "--output", "--summary", "--rerun-timeout")  # options followed by their value (each of parser()'s)


def split(argv: list[str]) -> tuple[list[str], list[str]]:
    """(graphfix's options, with ``-m MODULE``; the program's ``[SCRIPT] ARGS``)."""
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            return argv[:index], argv[index + 1:]
        if token == "-m":
            return argv[:index + 2], argv[index + 2:]
        if token.startswith("-m"):  # -mpkg.train, as python takes it
            return argv[:index] + ["-m", token[2:]], argv[index + 1:]
        if token == "-" or not token.startswith("-"):
            return argv[:index], argv[index:]
        index += 2 if token in VALUED else 1
    return argv, []


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphfix run", allow_abbrev=False,
        usage="graphfix run [options] (SCRIPT | -m MODULE) [ARGS...]",
        description="Run a PyTorch program with the autograd sanitizer on; report graph-lifetime bugs as they happen.",
    )
    parser.add_argument("--max-steps", type=int, default=None, metavar="N", help="stop cleanly after N optimizer steps")
    parser.add_argument("--output-format", choices=("text", "json"), default="text",
                        help="json on stdout: the program's own stdout goes to stderr while it runs")
    parser.add_argument("--output", default=None, metavar="FILE", help="write the findings to FILE, not stdout")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true", help="also print the fix a rule writes from the run's evidence")
    mode.add_argument("--fix", action="store_true", help="apply that fix, re-run the program to verify it, roll it back if the re-run fails")
    parser.add_argument(
        "--rerun-timeout", type=float, default=None, metavar="SECONDS",
        help="--fix: the re-run's time limit (default: 10 times the first run, at least 60 s); a re-run past it proves nothing",
    )
    parser.add_argument("--summary", default=None, help=argparse.SUPPRESS)  # the re-run's figures, for --fix
    parser.add_argument("-m", dest="module", default=None, metavar="MODULE", help="run a module, as python -m; what follows is its ARGS")
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """The options, with ``target``: the program's ``[SCRIPT] ARGS``. Exits as argparse does."""
    ours, target = split(argv)
    options = parser().parse_args(ours)
    options.target = target
    return options
