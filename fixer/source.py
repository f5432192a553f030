"""Reading and writing source files without changing what we did not mean to change:
encoding (PEP 263 cookie, BOM), newline style, mode and owner are kept; writes are atomic and
never overwrite a change made while the file was being fixed."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tokenize
from dataclasses import dataclass

from fixer import temp_files


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
LINE_BREAK_BYTES = re.compile(rb"\r\n|\r|\n")


OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")  # where str.splitlines() breaks too


def split_lines(text: str) -> list[str]:
    """Lines with their ends, broken where Python breaks them (never at form feed or U+2028)."""
    if not (any(c in text for c in "\x0b\x0c\x1c\x1d\x1e") if text.isascii() else OTHER_BREAKS.search(text)):
        return text.splitlines(keepends=True)  # the same lines, found in C
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


def _first_lines(data: bytes):
    """A readline for tokenize.detect_encoding that ends lines where Python does: a coding cookie
    on the first line of a CR-only file is found (io.BytesIO.readline only breaks at \\n)."""
    lines, start = [], 0
    for match in LINE_BREAK_BYTES.finditer(data):
        lines.append(data[start : match.end()])
        start = match.end()
        if len(lines) == 2:  # the cookie can only be on the first two lines
            break
    if len(lines) < 2:
        lines.append(data[start:])
    pending = iter(lines)
    return lambda: next(pending, b"")


def decode(data: bytes) -> Source:
    if b"\0" in data:
        raise SourceError("binary file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(_first_lines(data))
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


class WriteError(Exception):
    """A fix that was not written; the message is shown to the user as is."""


def write_atomic(path: str, data: bytes, expected: bytes) -> bool:
    """Replace the file at ``path`` by ``data`` if it still holds exactly ``expected`` (the bytes
    the fix was computed from). Returns False, writing nothing, when it already holds ``data``.

    The new content goes to a temporary file in the same folder, is flushed to disk, gets the
    original's owner and mode, and is renamed over the file: a reader sees the old or the new file,
    never a mix. A symlink stays a link; the file it points to is rewritten. Files the rename would
    wrong are refused: read-only, owned by someone whose ownership we cannot keep, hard-linked."""
    path = os.path.realpath(path)
    try:
        info = os.stat(path)
        _refuse_unsafe(path, info)
        fd, temp = temp_files.create(os.path.dirname(path))
    except OSError as exc:
        raise _cannot_write(exc) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            _keep_owner(handle.fileno(), info)
            os.fchmod(handle.fileno(), info.st_mode & 0o7777)  # after chown, which clears setuid bits
            os.fsync(handle.fileno())
        with open(path, "rb") as handle:
            current = handle.read()
        if current != expected:
            if current == data:  # e.g. a concurrent graphfix run fixed it already
                return False
            raise WriteError("changed while being fixed; not written")
        os.replace(temp, path)
        return True
    except OSError as exc:
        raise _cannot_write(exc) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)  # gone after a successful rename


def _cannot_write(exc: OSError) -> WriteError:
    if isinstance(exc, FileNotFoundError):
        return WriteError("deleted while being fixed; not written")
    return WriteError(f"cannot write: {exc.strerror or exc}; not fixed")


def _refuse_unsafe(path: str, info: os.stat_result) -> None:
    # The rename needs only write access to the folder; the file's own permission must still count.
    # No write bit at all is refused even for root, who passes os.access (editors warn there too).
    if not info.st_mode & 0o222 or not os.access(path, os.W_OK):
        raise WriteError("cannot write: read-only file; not fixed")
    if info.st_nlink > 1:
        raise WriteError(f"has {info.st_nlink} hard links; not fixed, the atomic rename would split them")


def _keep_owner(fd: int, info: os.stat_result) -> None:
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) == (info.st_uid, info.st_gid):
        return
    try:
        os.fchown(fd, info.st_uid, info.st_gid)
    except PermissionError:
        raise WriteError(
            f"cannot write: owned by uid {info.st_uid} gid {info.st_gid}, which the rewritten file cannot keep; not fixed"
        ) from None
