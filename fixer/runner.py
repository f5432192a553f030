"""Run the engine over many files, using all cores, answering from the result cache what it can."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import time
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Union

from fixer import depends
from fixer.analysis.project_files import forget_loaded
from fixer.engine import FileResult, Options, process_file

if TYPE_CHECKING:
    from fixer.cache import RunCache

_options: tuple[Options, ...] = ()
_record = False  # collect each analysis's dependencies (for the cache)
INLINE_LIMIT = 8  # below this many files a process pool costs more than it saves
# The files are analysed without the automatic cycle collector. An analysis leaves almost no
# cycles (its memos are cleared, tests/test_no_cycles.py; about one unreachable object a file on
# torch's tree), yet the collector, woken by allocation counts, scanned every node of each imported
# module's tree at least once (6 % of a run). A collection runs after a file only once the objects
# kept since the last one pass this bound (a worker's whole run over torch's tree keeps about half):
# what cycles there are stay bounded without scanning what is alive for good.
KEPT_BEFORE_COLLECTION = 1_000_000


def _init(options: tuple[Options, ...], record: bool = False) -> None:
    global _options, _record
    _options, _record = options, record
    gc.freeze()  # graphfix's own modules and options: never worth scanning again
    gc.disable()  # (a worker's whole life; the inline run restores the caller's collector after)


def _work(item: tuple[str, int]) -> tuple[FileResult, dict[str, depends.Fingerprint]]:
    """The file's result and the files its analysis read (when recording, for the cache)."""
    path, which = item
    start = time.perf_counter()
    with depends.collect() if _record else contextlib.nullcontext({}) as found:
        try:
            result = process_file(path, _options[which])
        except Exception as exc:  # never lose the whole run to one file
            result = FileResult(path, errors=[f"internal error: {type(exc).__name__}: {exc}"], internal=True)
    result.seconds = time.perf_counter() - start
    forget_loaded()
    if gc.get_count()[0] > KEPT_BEFORE_COLLECTION:  # (objects allocated and not yet freed since the last collection)
        gc.collect()
    return result, found


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
    cache: Optional["RunCache"] = None,
) -> list[FileResult]:
    """Each file's result, in the order of ``paths``. ``options`` is one Options for every file,
    or several with ``choice[i]`` the index of file i's; ``on_result`` sees each result as it comes.
    With ``cache``, a file whose cached result is still valid is not analysed."""
    variants = (options,) if isinstance(options, Options) else tuple(options)
    items = list(zip(paths, choice if choice is not None else [0] * len(paths)))
    results = []
    if cache is not None:
        for path, which in items:
            hit = cache.lookup(path, variants[which])
            if hit is not None:
                results.append(hit)
                if on_result:
                    on_result(hit)
        if results:
            known = {r.path for r in results}
            items = [item for item in items if item[0] not in known]
        if items:
            cache.prepare()  # before any analysis looks at the folder it may create
    choice_of = dict(items)
    for result, found in _analyse(items, variants, jobs, cache is not None):
        results.append(result)
        if cache is not None:
            cache.store(result, variants[choice_of[result.path]], found)
        if on_result:
            on_result(result)
    if cache is not None:
        cache.save()
    order = {path: index for index, path in enumerate(paths)}
    return sorted(results, key=lambda r: order[r.path])


def _analyse(items: list[tuple[str, int]], variants: tuple[Options, ...], jobs: int, record: bool):
    """(result, files its analysis read) of each item, as they come."""
    if not items:
        return
    cores = os.cpu_count() or 1
    # never more workers than files, nor a fork bomb from a typo: at most 4 per core
    jobs = min(jobs if jobs > 0 else cores, len(items), 4 * cores)
    if jobs == 1 or len(items) < INLINE_LIMIT:
        enabled = gc.isenabled()
        _init(variants, record)
        try:
            for item in items:
                yield _work(item)
        finally:
            if enabled:
                gc.enable()
        return
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with multiprocessing.get_context(method).Pool(jobs, initializer=_init, initargs=(variants, record)) as pool:
        # largest files first in small chunks, so no worker is left with a big file at the end
        chunk = max(1, min(8, len(items) // (jobs * 32)))
        yield from pool.imap_unordered(_work, sorted(items, key=_size, reverse=True), chunksize=chunk)
