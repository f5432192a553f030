"""Run the engine over many files, using all cores."""

from __future__ import annotations

import multiprocessing
import os
from typing import Optional, Sequence

from fixer.engine import FileResult, Options, process_file

_options: Optional[Options] = None
INLINE_LIMIT = 8  # below this many files a process pool costs more than it saves


def _init(options: Options) -> None:
    global _options
    _options = options


def _work(path: str) -> FileResult:
    assert _options is not None
    try:
        return process_file(path, _options)
    except Exception as exc:  # never lose the whole run to one file
        return FileResult(path, errors=[f"internal error: {type(exc).__name__}: {exc}"], internal=True)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def run(paths: Sequence[str], options: Options, jobs: int = 0) -> list[FileResult]:
    cores = os.cpu_count() or 1
    # never more workers than files, nor a fork bomb from a typo: at most 4 per core
    jobs = min(jobs if jobs > 0 else cores, len(paths), 4 * cores)
    if jobs == 1 or len(paths) < INLINE_LIMIT:
        _init(options)
        results = [_work(path) for path in paths]
    else:
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with multiprocessing.get_context(method).Pool(jobs, initializer=_init, initargs=(options,)) as pool:
            # largest files first in small chunks, so no worker is left with a big file at the end
            chunk = max(1, min(8, len(paths) // (jobs * 32)))
            results = list(pool.imap_unordered(_work, sorted(paths, key=_size, reverse=True), chunksize=chunk))
    order = {path: index for index, path in enumerate(paths)}
    return sorted(results, key=lambda r: order[r.path])
