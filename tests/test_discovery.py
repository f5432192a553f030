"""File discovery: which files are checked, and that finding them runs nothing and never blocks."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest

from fixer.source import SourceError, read_bytes


def special_files(folder: Path) -> None:
    """A FIFO, a socket and a device, each named like a Python file."""
    os.mkfifo(folder / "fifo.py")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "sock.py"))
    sock.close()
    (folder / "dev.py").symlink_to("/dev/zero")


@pytest.fixture
def no_hang():
    """Fail instead of hanging (the old read_bytes blocked forever opening a FIFO)."""

    def timeout(signum, frame):
        raise TimeoutError("blocked")

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_read_bytes_refuses_a_fifo_without_blocking(tmp_path, no_hang):
    special_files(tmp_path)
    for name in ("fifo.py", "sock.py", "dev.py"):
        with pytest.raises(SourceError, match="^cannot read: not a regular file$"):
            read_bytes(str(tmp_path / name))
    (tmp_path / "ok.py").write_bytes(b"x = 1\n")
    assert read_bytes(str(tmp_path / "ok.py")) == b"x = 1\n"
