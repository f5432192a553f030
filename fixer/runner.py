"""Run the engine over many files, using all cores."""

from __future__ import annotations

import gc
import multiprocessing
import os
import time
from typing import Callable, Optional, Sequence, Union

from fixer.analysis.project import forget_loaded
from fixer.engine import FileResult, Options, process_file

_options: tuple[Options, ...] = ()
INLINE_LIMIT = 8  # below this many files a process pool costs more than it saves
# Parsing allocates ASTs by the million and almost none of them form cycles; at Python's default
# (a young collection every 700 net allocations) the collector takes a third of a run's time.
YOUNG_COLLECTION_EVERY = 10_000


def _init(options: tuple[Options, ...]) -> None:
    global _options
    _options = options
    gc.freeze()  # graphfix's own modules and options: never worth scanning again
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])


def _work(item: tuple[str, int]) -> FileResult:
    path, which = item
    start = time.perf_counter()
    try:
        result = process_file(path, _options[which])
    except Exception as exc:  # never lose the whole run to one file
        result = FileResult(path, errors=[f"internal error: {type(exc).__name__}: {exc}"], internal=True)
    result.seconds = time.perf_counter() - start
    forget_loaded()
    return result


def _size(item: tuple[str, int]) -> int:
    try:
        return os.path.getsize(item[0])
    except OSError:
        return 0


def run(
    paths: Sequence[str],
    options: Union[Options, Sequence[Options]],
    jobs: int = 0,
    choice: Optional[Sequence[int]] = None,
    on_result: Optional[Callable[[FileResult], None]] = None,
) -> list[FileResult]:
    """Each file's result, in the order of ``paths``. ``options`` is one Options for every file,
    or several with ``choice[i]`` the index of file i's; ``on_result`` sees each result as it comes."""
    variants = (options,) if isinstance(options, Options) else tuple(options)
    items = list(zip(paths, choice if choice is not None else [0] * len(paths)))
    cores = os.cpu_count() or 1
    # never more workers than files, nor a fork bomb from a typo: at most 4 per core
    jobs = min(jobs if jobs > 0 else cores, len(paths), 4 * cores)
    results = []
    if jobs == 1 or len(paths) < INLINE_LIMIT:
        _init(variants)
        for item in items:
            results.append(_work(item))
            if on_result:
                on_result(results[-1])
    else:
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with multiprocessing.get_context(method).Pool(jobs, initializer=_init, initargs=(variants,)) as pool:
            # largest files first in small chunks, so no worker is left with a big file at the end
            chunk = max(1, min(8, len(paths) // (jobs * 32)))
            for result in pool.imap_unordered(_work, sorted(items, key=_size, reverse=True), chunksize=chunk):
                results.append(result)
                if on_result:
                    on_result(result)
    order = {path: index for index, path in enumerate(paths)}
    return sorted(results, key=lambda r: order[r.path])
