"""JSON-RPC 2.0 over a byte stream framed as LSP frames it (``Content-Length`` headers), with the
standard library only: the server's start is this module, json and threading, nothing more.

A malformed client must not stop the server: a message's claimed length is read in chunks (a header
claiming ``Content-Length: 999999999999`` once raised MemoryError, allocated at once), a body that
is no JSON is answered with a parse error, and only the end of input ends the reading."""

from __future__ import annotations

import json
import threading
from typing import Any, BinaryIO, Optional

CHUNK = 1 << 20

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002


class RpcError(Exception):
    """A request's failure, answered to the client with this code and message."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class FrameError(Exception):
    """A frame whose body is not one JSON value: ``message`` is what the answer says."""


def read_exactly(stream: BinaryIO, n: int) -> bytes:
    """Up to ``n`` bytes, fewer at the end of input; memory grows only with the bytes that arrive."""
    parts, left = [], n
    while left > 0:
        part = stream.read(min(left, CHUNK))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def read_message(stream: BinaryIO) -> Optional[Any]:
    """The next message's JSON value; None at the end of input. Raises FrameError for a body that is
    not JSON (the frame is consumed: the next one is read after it)."""
    length: Optional[int] = None
    while True:
        line = stream.readline()
        if not line:
            return None
        if not line.strip():
            if length is None:
                continue  # blank lines between frames, or a frame without its length: skipped
            break
        name, _, value = line.decode("ascii", "replace").partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = max(0, int(value.strip()))
            except ValueError:
                length = None
    body = read_exactly(stream, length)
    if len(body) < length:
        return None  # cut off by the end of input
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise FrameError(f"Parse error: {exc}") from None


class Writer:
    """Frames and writes messages; one at a time, whichever thread sends."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream
        self.lock = threading.Lock()

    def send(self, payload: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **payload}, separators=(",", ":")).encode()  # ASCII: \u escapes
        with self.lock:
            try:
                self.stream.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                self.stream.flush()
            except (BrokenPipeError, ValueError):  # the client went away (or closed our output)
                pass

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def answer(self, msg_id: Any, result: Any) -> None:
        self.send({"id": msg_id, "result": result})

    def fail(self, msg_id: Any, code: int, message: str) -> None:
        self.send({"id": msg_id, "error": {"code": code, "message": message}})
