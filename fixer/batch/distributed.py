"""``--scheduler ADDRESS``: the batch's per-repository work on a dask.distributed cluster (the
``distributed`` extra). The client plans the run as locally (fixer.batch.work: discovery,
configs, which repository owns each file); each repository's files become one task that runs
the same engine (fixer.runner.run, one file after another) on a worker; the results come back
to the client, which prints, reports and writes patches and branches as a local run does.

Assumption: workers see the repositories at the same paths as the client (a shared mount or
the same image). A path a worker cannot read is a file error in its repository's results, as
it would be locally. Workers need graphfix installed, in the client's version.

The engine keeps per-process state (the project being analysed, the parsed imported files),
so a worker process runs one graphfix task at a time: start workers with ``--nthreads 1`` and
as many processes as cores (``dask worker ADDRESS --nworkers auto --nthreads 1``)."""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from fixer import __version__
from fixer.batch.work import Work
from fixer.engine import FileResult, Options
from fixer.runner import run

if TYPE_CHECKING:
    from distributed import Client

INSTALL = "pip install 'graphfix[distributed]'"
SCHEMES = ("tcp://", "tls://", "inproc://", "ws://", "wss://", "ucx://")
_engine = threading.Lock()  # one graphfix task at a time per worker process (module-level engine state)


class ClusterError(Exception):
    """The cluster cannot be used: nothing was checked (exit 2)."""


def connect(scheduler: str) -> "Client":
    """A client of the scheduler at ``scheduler`` (an address such as tcp://host:8786, or a
    scheduler file). The connection timeout is dask's (``distributed.comm.timeouts.connect``,
    e.g. DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=10s). Raises ClusterError."""
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError(f"--scheduler needs dask.distributed, which is not installed: {INSTALL}") from None
    address = scheduler if scheduler.startswith(SCHEMES) else _address_in(scheduler)
    try:
        client = Client(address, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ClusterError(f"--scheduler {scheduler}: cannot reach the scheduler at {address} ({type(exc).__name__}: {exc})") from None
    try:
        versions = client.run(_version)
    except Exception as exc:  # a worker that cannot import graphfix cannot even unpickle _version
        client.close()
        raise ClusterError(f"--scheduler {scheduler}: the workers cannot run graphfix ({type(exc).__name__}: {exc}); {INSTALL} on them")
    other = sorted({f"{worker} has {version}" for worker, version in versions.items() if version != __version__})
    if not versions or other:
        client.close()
        why = "; ".join(other) or "no worker is connected"
        raise ClusterError(f"--scheduler {scheduler}: {why} (this is graphfix {__version__})")
    return client


def _address_in(scheduler_file: str) -> str:
    """The address a scheduler file (``dask scheduler --scheduler-file FILE``: JSON) gives."""
    try:
        with open(scheduler_file, encoding="utf-8") as handle:
            address = json.load(handle).get("address")
    except (OSError, ValueError, AttributeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise ClusterError(f"--scheduler {scheduler_file}: neither an address (tcp://host:port) nor a readable scheduler file ({why})") from None
    if not isinstance(address, str) or not address.startswith(SCHEMES):
        raise ClusterError(f"--scheduler {scheduler_file}: the scheduler file gives no address")
    return address


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _version() -> str:
    return __version__


def check_repository(paths: Sequence[str], variants: Sequence[Options], choice: Sequence[int]) -> list[FileResult]:
    """The task: one repository's files, checked as the local runner checks them."""
    with _engine:
        return run(paths, variants, 1, choice)


def run_on_cluster(client: "Client", work: Work, on_result: Optional[Callable[[FileResult], None]] = None) -> list[FileResult]:
    """Each file's result, in the order of ``work.files``, one task per repository. A task the
    cluster loses (a worker killed, the scheduler gone) gives its files an error each: they
    were not checked."""
    from distributed import as_completed

    groups: dict[int, list[int]] = {}
    for index, owner in enumerate(work.owners):
        groups.setdefault(owner, []).append(index)
    tasks = {}
    # the largest repositories first, so that no worker is left with a big one at the end
    for indices in sorted(groups.values(), key=lambda group: -sum(_size(work.files[i]) for i in group)):
        paths = [os.path.abspath(work.files[i]) for i in indices]  # the workers' current folder is not ours
        future = client.submit(check_repository, paths, work.variants, [work.choice[i] for i in indices], pure=False)
        tasks[future] = indices
    results: list[Optional[FileResult]] = [None] * len(work.files)
    for future in as_completed(tasks, loop=client.loop):
        indices = tasks.pop(future)
        try:
            found = future.result()
        except Exception as exc:
            why = f"not checked: the cluster lost its repository's task ({type(exc).__name__}: {exc})"
            found = [FileResult(work.files[i], errors=[why]) for i in indices]
        future.release()
        for index, result in zip(indices, found):
            result.path = work.files[index]
            results[index] = result
            if on_result:
                on_result(result)
    return results  # type: ignore[return-value]  # every index is filled
