"""What LSP says about text, with the standard library only: the open documents, the position
encoding the client chose (a column counts UTF-16 code units unless it chose UTF-8 or UTF-32),
``file:`` URIs, and the parts of a message's parameters, checked (a request whose parameters do not
fit is answered with Invalid Params, never left waiting)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import unquote, urlsplit

from fixer.server.jsonrpc import INVALID_PARAMS, RpcError

UTF16, UTF8, UTF32 = "utf-16", "utf-8", "utf-32"
LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # Python's line breaks, which are LSP's too
DRIVE = re.compile(r"^/[a-zA-Z]:")
JSON_TYPE = {dict: "an object", list: "an array", str: "a string", int: "an integer"}


@dataclass
class Document:
    uri: str
    version: Optional[int]
    text: str


class Codec:
    """Characters <-> the client's code units on one line."""

    def __init__(self, encoding: str = UTF16):
        self.encoding = encoding

    def char_units(self, char: str) -> int:
        if self.encoding == UTF32:
            return 1
        if self.encoding == UTF8:
            return len(char.encode("utf-8", "surrogatepass"))
        return 2 if ord(char) > 0xFFFF else 1

    def units(self, text: str) -> int:
        if self.encoding == UTF32:
            return len(text)
        return sum(self.char_units(char) for char in text)

    def column(self, line: str, units: int) -> int:
        """The character at ``units`` code units into ``line`` (its break excluded, clamped to its end)."""
        text = line.rstrip("\r\n")
        column = counted = 0
        while column < len(text) and counted < units:
            counted += self.char_units(text[column])
            column += 1
        return column


def negotiated(capabilities: Any) -> str:
    """The client's first position encoding that the server knows; UTF-16 when it names none."""
    general = capabilities.get("general") if isinstance(capabilities, dict) else None
    offered = general.get("positionEncodings") if isinstance(general, dict) else None
    return next((e for e in offered or () if e in (UTF8, UTF16, UTF32)), UTF16) if isinstance(offered, list) else UTF16


def lines_of(text: str) -> list[str]:
    return LINE.findall(text)


def offset(text: str, line: int, units: int, codec: Codec) -> int:
    lines = lines_of(text)
    if line >= len(lines):
        return len(text)
    return sum(len(x) for x in lines[:line]) + codec.column(lines[line], units)


def changed(text: str, change: Any, codec: Codec) -> str:
    """``text`` after one ``contentChanges`` entry: the whole text, or a range replaced."""
    new = required(change, "text", str)
    if "range" not in change:
        return new
    where = required(change, "range", dict)
    (line, units), (end_line, end_units) = position(where, "start"), position(where, "end")
    start, end = offset(text, line, units, codec), offset(text, end_line, end_units, codec)
    return text[:start] + new + text[max(start, end):]


def on_disk(uri: str) -> Optional[str]:
    """The file a ``file:`` URI names; None for other schemes and for a path no file can have
    (``%00``), which is checked as a buffer not on disk instead of failing in the first ``stat``."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        return None
    path = unquote(parts.path)
    if parts.netloc and path:
        path = f"//{parts.netloc}{path}"  # a UNC share: file://server/share/x.py
    elif DRIVE.match(path):
        path = path[1].lower() + path[2:]  # file:///C:/x.py
    if os.sep != "/":
        path = path.replace("/", os.sep)
    return path if path and "\0" not in path else None


def read_file(uri: str) -> Optional[str]:
    """The text of a document the client never opened, from its file; None if there is none."""
    path = on_disk(uri)
    try:
        with open(path, encoding="utf-8", newline="") as file:  # type: ignore[arg-type]
            return file.read()
    except (TypeError, OSError, ValueError):
        return None


def required(params: Any, key: str, kind: type) -> Any:
    value = params.get(key) if isinstance(params, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RpcError(INVALID_PARAMS, f"Invalid Params: {key} must be {JSON_TYPE[kind]}")
    return value


def uri_of(params: Any) -> str:
    return required(required(params, "textDocument", dict), "uri", str)


def position(params: Any, key: str = "position") -> tuple[int, int]:
    """(line, character in code units) of an LSP Position; both must be non-negative integers."""
    where = required(params, key, dict)
    line, character = required(where, "line", int), required(where, "character", int)
    if line < 0 or character < 0:
        raise RpcError(INVALID_PARAMS, f"Invalid Params: {key} must not be negative")
    return line, character
