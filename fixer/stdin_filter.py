"""Checking a buffer read from stdin (``graphfix [--fix|--diff] - --stdin-filename NAME``), the
contract editors and filters rely on: with ``--fix -`` stdout carries the whole buffer, fixed or
(on any error, a usage or configuration error included) exactly as it came, and nothing else."""

from __future__ import annotations

import sys

from fixer import reporting
from fixer.engine import FileResult, Options, process_source
from fixer.source import SourceError, decode, encode

_owed: list[bool] = []  # [True] while a `--fix -` run has not yet written its buffer


def owe_buffer() -> None:
    """This run is an editor filter: whatever happens, stdout must carry the buffer."""
    _owed[:] = [True]


def give_back_buffer() -> None:
    """On an error before the buffer was read: copy stdin to stdout unchanged (once)."""
    if _owed:
        _owed.clear()
        sys.stdout.buffer.write(sys.stdin.buffer.read())
        sys.stdout.flush()


def run_stdin(name: str, options: Options, diff: bool, fix: bool, fmt: str, quiet: bool, excluded: bool = False) -> int:
    """The editor's contract for ``--fix -``: stdout carries the whole buffer, fixed or (on any
    error) exactly as it came, and nothing else; nothing is written to disk. ``excluded``: the
    --stdin-filename is excluded and force-exclude is on, so the buffer is not checked (as ruff)."""
    _owed.clear()
    data = sys.stdin.buffer.read()
    if excluded:
        if fix:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        return reporting.EXIT_CLEAN
    try:
        source = decode(data)
        # stdin is always analysed: the editor asked about this buffer explicitly
        result = process_source(name, data, options, source)
    except SourceError as exc:
        result = FileResult(name, errors=[str(exc)])
    except Exception as exc:  # never lose the buffer to a bug of ours
        result = FileResult(name, errors=[f"internal error: {type(exc).__name__}: {exc}"], internal=True)
    if not fix:
        return reporting.report([result], options.unsafe, diff, fix, fmt, quiet)
    sys.stdout.buffer.write(encode(source, result.fixed) if result.changed else data)
    sys.stdout.flush()
    if not quiet:
        reporting.print_diagnostics([result], "remaining", options.unsafe, fmt, sys.stderr)
    reporting.print_problems([result], quiet)
    return reporting.exit_code([result], len(result.remaining))
