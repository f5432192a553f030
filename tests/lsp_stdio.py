"""A language server on stdio driven by hand, message by message (no LSP client library between
the test and the bytes): start it, send, wait for a message, stop it; killed if a test fails."""

from __future__ import annotations

import contextlib
import subprocess
from typing import Callable, Iterator

from benchmarks.server_start import message, read_message


class Stdio:
    def __init__(self, command: list[str], **popen) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, **popen)

    def send(self, **payload) -> None:
        self.process.stdin.write(message({"jsonrpc": "2.0", **payload}))
        self.process.stdin.flush()

    def until(self, wanted: Callable[[dict], bool]) -> dict:
        """The first message from the server that ``wanted`` accepts (the others are skipped)."""
        while not wanted(answer := read_message(self.process.stdout)):
            pass
        return answer

    def stop(self) -> int:
        """shutdown, exit: the server's exit code."""
        self.send(id="shutdown", method="shutdown")
        self.send(method="exit")
        self.process.stdin.close()
        return self.process.wait(timeout=60)


@contextlib.contextmanager
def stdio_server(command: list[str], **popen) -> Iterator[Stdio]:
    server = Stdio(command, **popen)
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
