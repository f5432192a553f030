"""Reading and writing source files without changing what we did not mean to change:
encoding (PEP 263 cookie, BOM), newline style and permissions are kept; writes are atomic."""

from __future__ import annotations

import errno
import io
import os
import re
import stat
import tempfile
import tokenize
from dataclasses import dataclass


class SourceError(Exception):
    """A file that cannot be read or decoded; the message is shown to the user as is."""


@dataclass(frozen=True)
class Source:
    text: str
    encoding: str  # "utf-8-sig" when the file has a BOM
    newline: str


# The only line breaks of Python source (the tokenizer's and ast's): str.splitlines() also breaks at
# form feed, VT, \x1c-\x1e, U+0085, U+2028/9, which would shift every position after them.
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """Lines with their ends, broken where Python breaks them (never at form feed or U+2028)."""
    lines, start = [], 0
    for match in LINE_BREAK.finditer(text):
        lines.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


def detect_newline(text: str) -> str:
    index = text.find("\n")
    if index > 0 and text[index - 1] == "\r":
        return "\r\n"
    if index < 0 and "\r" in text:
        return "\r"
    return "\n"


def decode(data: bytes) -> Source:
    if b"\0" in data:
        raise SourceError("binary file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as exc:
        raise SourceError(f"cannot decode: {exc}") from None
    if encoding == "utf-8-sig":
        text = text.removeprefix("\ufeff") if hasattr(text, "removeprefix") else text.lstrip("\ufeff")
    return Source(text, encoding, detect_newline(text))


def encode(source: Source, text: str) -> bytes:
    return text.encode(source.encoding)


# Opening a FIFO for reading blocks until a writer comes, and a terminal may become ours: neither
# can happen with these flags. The file type is checked on the open descriptor, so no race.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


def read_bytes(path: str) -> bytes:
    """The bytes of a regular file; anything else (FIFO, socket, device, folder) is refused."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:  # ENXIO: a socket, or a device with nothing behind it
        reason = "not a regular file" if exc.errno == errno.ENXIO else exc.strerror or exc
        raise SourceError(f"cannot read: {reason}") from None
    with os.fdopen(fd, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SourceError("cannot read: not a regular file")
            return handle.read()
        except OSError as exc:
            raise SourceError(f"cannot read: {exc.strerror or exc}") from None


def write_atomic(path: str, data: bytes) -> None:
    """Write via a temporary file in the same folder and rename it over ``path`` (over the file a
    symlink points to, so the link stays a link)."""
    path = os.path.realpath(path)
    folder = os.path.dirname(path)
    mode = os.stat(path).st_mode & 0o7777
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".graphfix-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
