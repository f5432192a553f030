"""The temporary files of --fix: ``.graphfix-<pid>-<random>.tmp`` next to the file they replace.

One lives from the start of a write to its rename, so a process killed in between (kill -9, power
loss) leaves it behind: a complete or partial copy of a fixed file, never a damaged source file.
The next write into that folder removes such leftovers, recognised by their owner being gone."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile

PREFIX = ".graphfix-"
NAME = re.compile(r"\.graphfix-(\d+)-\w+\.tmp\Z")


def create(folder: str) -> tuple[int, str]:
    """A new temporary file in ``folder``, after removing those that dead runs left there."""
    remove_stale(folder)
    return tempfile.mkstemp(dir=folder, prefix=f"{PREFIX}{os.getpid()}-", suffix=".tmp")


def write_whole(path: str, data: bytes) -> None:
    """Create or replace the file at ``path`` (a patch, a report): written to a temporary file
    beside it, flushed to disk, renamed over it, so that it is never seen half-written. Raises
    OSError."""
    fd, temp = create(os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)  # gone after a successful rename


def remove_stale(folder: str) -> None:
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            match = NAME.match(entry.name)
            if match and not _running(int(match.group(1))) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def _running(pid: int) -> bool:
    """Whether process ``pid`` still runs (on Linux a zombie does not count). A pid of another pid
    namespace sharing the folder may look dead: its run then reports the file as not written."""
    if pid == os.getpid():
        return False  # one write at a time: a temp file with our pid is a dead namesake's
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by another user
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True
