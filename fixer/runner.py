"""Run the engine over many files, using all cores, answering from the result cache what it can."""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Callable, Optional, Sequence, Union

from fixer import depends
from fixer.results import FileResult, Options

if TYPE_CHECKING:
    from fixer.cache import Cache

_options: Optional[Options] = None
_record = False  # collect each analysis's dependencies (for the cache)
INLINE_LIMIT = 8  # below this many files a process pool costs more than it saves
Found = tuple[FileResult, dict[str, depends.Fingerprint]]


def _init(options: Options, record: bool) -> None:
    global _options, _record
    _options, _record = options, record


def _work(path: str) -> Found:
    """The file's result and the files its analysis read (for the cache)."""
    from fixer.engine import process_file  # only runs that analyse something import the engine

    assert _options is not None
    with depends.collect() if _record else contextlib.nullcontext({}) as found:
        try:
            return process_file(path, _options), found
        except Exception as exc:  # never lose the whole run to one file
            return FileResult(path, errors=[f"internal error: {type(exc).__name__}: {exc}"], internal=True), {}


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def run(
    paths: Sequence[str], options: Union[Options, Callable[[], Options]], jobs: int = 0, cache: Optional["Cache"] = None
) -> list[FileResult]:
    """``options`` may be a function, called only if some file must be analysed."""
    cached = {}
    if cache is not None:
        for path in paths:
            hit = cache.lookup(path)
            if hit is not None:
                cached[path] = hit
    todo = [path for path in paths if path not in cached]
    if todo and cache is not None:
        cache.prepare()
    found = _analyse(todo, options() if callable(options) else options, jobs, cache is not None) if todo else []
    if cache is not None:
        for result, deps in found:
            cache.store(result, deps)
        cache.save()
    results = list(cached.values()) + [result for result, _ in found]
    order = {path: index for index, path in enumerate(paths)}
    return sorted(results, key=lambda r: order[r.path])


def _analyse(paths: Sequence[str], options: Options, jobs: int, record: bool) -> list[Found]:
    import multiprocessing

    import fixer.engine  # noqa: F401  (imported once, before the workers fork)

    cores = os.cpu_count() or 1
    # never more workers than files, nor a fork bomb from a typo: at most 4 per core
    jobs = min(jobs if jobs > 0 else cores, len(paths), 4 * cores)
    if jobs == 1 or len(paths) < INLINE_LIMIT:
        _init(options, record)
        return [_work(path) for path in paths]
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with multiprocessing.get_context(method).Pool(jobs, initializer=_init, initargs=(options, record)) as pool:
        # largest files first in small chunks, so no worker is left with a big file at the end
        chunk = max(1, min(8, len(paths) // (jobs * 32)))
        return list(pool.imap_unordered(_work, sorted(paths, key=_size, reverse=True), chunksize=chunk))
