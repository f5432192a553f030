"""One client's session over JSON-RPC: the LSP lifecycle (``initialize``, ``shutdown``, ``exit``),
each message routed to its handler and every request answered, and timers (a buffer's check once
typing settles). One thread runs every handler, in the order the messages came; another only
reads the input, so a timer fires while the client is quiet."""

from __future__ import annotations

import queue
import sys
import threading
import time
import traceback
from typing import Any, BinaryIO, Callable, Optional

from fixer.server.jsonrpc import (
    INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, SERVER_NOT_INITIALIZED, FrameError, RpcError, Writer,
    read_message,
)

Handler = Callable[[Any], Any]
END = object()  # the end of input, as the reading thread reports it


def read_into(stream: BinaryIO, inbox: queue.Queue) -> None:
    while True:
        try:
            message = read_message(stream)
        except FrameError as exc:
            inbox.put(exc)
            continue
        except (OSError, ValueError):
            message = None
        inbox.put(END if message is None else message)
        if message is None:
            return


class Session:
    """Subclasses name their handlers in ``requests`` and ``notifications`` (method -> callable
    taking the params). ``initialize`` is a request like the others; until it is answered every
    other request is refused, after ``shutdown`` every request is, and ``exit`` ends the loop (with
    1 if no ``shutdown`` came first, as LSP says)."""

    requests: dict[str, Handler]
    notifications: dict[str, Handler]

    def __init__(self, writer: Writer):
        self.rpc = writer
        self.initialized = False
        self.shut_down = False
        self.exit_code: Optional[int] = None
        self.timers: dict[Any, tuple[float, Callable[[], None]]] = {}

    def later(self, key: Any, seconds: float, action: Callable[[], None]) -> None:
        """Run ``action`` in ``seconds``, replacing what was due under ``key``."""
        self.timers[key] = (time.monotonic() + seconds, action)

    def cancel(self, key: Any) -> None:
        self.timers.pop(key, None)

    def run(self, stream: BinaryIO) -> int:
        """Serve until ``exit`` or the end of input (0: a client that went away is no failure)."""
        inbox: queue.Queue = queue.Queue()
        threading.Thread(target=read_into, args=(stream, inbox), daemon=True, name="graphfix-reader").start()
        while self.exit_code is None:
            try:
                message = inbox.get(timeout=self._until_next_timer())
            except queue.Empty:
                message = None
            if message is END:
                return 0
            if message is not None:
                self.handle(message)
            self._fire_due()
        return self.exit_code

    def _until_next_timer(self) -> Optional[float]:
        if not self.timers:
            return None
        return max(0.0, min(due for due, _ in self.timers.values()) - time.monotonic())

    def _fire_due(self) -> None:
        now = time.monotonic()
        for key in [k for k, (due, _) in self.timers.items() if due <= now]:
            _, action = self.timers.pop(key)
            self._guarded(action, f"timer {key}")

    def handle(self, message: Any) -> None:
        if isinstance(message, FrameError):
            self.rpc.fail(None, PARSE_ERROR, str(message))
            return
        if not isinstance(message, dict) or not isinstance(message.get("method", ""), str):
            self.rpc.fail(None, INVALID_REQUEST, "Invalid Request: not a JSON-RPC message object")
            return
        method, params = message.get("method"), message.get("params")
        if method is None:
            return  # an answer: this server sends the client no request
        if "id" not in message:
            self._notification(method, params)
            return
        msg_id = message["id"]
        if not isinstance(msg_id, (int, str)) or isinstance(msg_id, bool):
            self.rpc.fail(None, INVALID_REQUEST, "Invalid Request: id must be an integer or a string")
            return
        try:
            self.rpc.answer(msg_id, self._request(method, params))
        except RpcError as exc:
            self.rpc.fail(msg_id, exc.code, exc.message)
        except Exception as exc:  # a bug of ours must not leave the client waiting, nor end the server
            traceback.print_exc(file=sys.stderr)
            self.rpc.fail(msg_id, INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")

    def _request(self, method: str, params: Any) -> Any:
        if self.shut_down:
            raise RpcError(INVALID_REQUEST, f"Invalid Request: {method} after shutdown")
        if method == "initialize":
            if self.initialized:
                raise RpcError(INVALID_REQUEST, "Invalid Request: initialize was already answered")
            result = self.requests[method](params)
            self.initialized = True
            return result
        if not self.initialized:
            raise RpcError(SERVER_NOT_INITIALIZED, f"Server not initialized: {method} before initialize")
        if method == "shutdown":
            self.shut_down = True
            return None
        handler = self.requests.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"Method Not Found: {method}")
        return handler(params)

    def _notification(self, method: str, params: Any) -> None:
        if method == "exit":
            self.exit_code = 0 if self.shut_down else 1
            return
        handler = self.notifications.get(method)
        if handler is not None and self.initialized and not self.shut_down:
            self._guarded(lambda: handler(params), method)  # unknown ones ($/cancelRequest, $/setTrace...) are dropped

    def _guarded(self, action: Callable[[], None], what: str) -> None:
        """A notification has no answer to carry an error: a failure is written to stderr, the
        editor's log of the server, and the server goes on."""
        try:
            action()
        except RpcError as exc:
            print(f"graphfix server: {what}: {exc.message}", file=sys.stderr)
        except Exception:
            print(f"graphfix server: {what} failed:", file=sys.stderr)
            traceback.print_exc(file=sys.stderr)
