"""What a malformed client can send must not stop the server: a message's claimed length is read
in chunks (never allocated at once), and a request whose parameters do not fit its method is
answered with an error instead of never. Nor may a long session grow the server's memory."""

from __future__ import annotations

from typing import Any, BinaryIO

from pygls.exceptions import JsonRpcException
from pygls.protocol import LanguageServerProtocol

CHUNK = 1 << 20


class ChunkedReader:
    """stdin for pygls, whose ``read(n)`` would allocate ``n`` bytes up front: a header claiming
    ``Content-Length: 999999999999`` raised MemoryError and ended the server. Memory now grows only
    with the bytes that really arrive."""

    def __init__(self, stream: BinaryIO):
        self.stream = stream

    def readline(self) -> bytes:
        return self.stream.readline()

    def read(self, n: int) -> bytes:
        parts, left = [], n
        while left > 0:
            part = self.stream.read(min(left, CHUNK))
            if not part:
                break
            parts.append(part)
            left -= len(part)
        return b"".join(parts)


class GraphfixProtocol(LanguageServerProtocol):
    """pygls raises on a request whose parameters it cannot read (a negative position) and answers
    nothing: the client waited forever. The request now gets the JSON-RPC error. And pygls files
    every notification's finished handler under a fresh id, forever (15 KB per document opened,
    changed and closed): those go."""

    def _handle_notification(self, method_name: str, params: Any):
        super()._handle_notification(method_name, params)
        for msg_id in [key for key, future in self._request_futures.items() if future.done()]:
            del self._request_futures[msg_id]

    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            msg_id = data.get("id") if isinstance(data, dict) else None
            if "method" in data and isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool):
                self._send_response(msg_id, error=exc.to_response_error())
            raise
