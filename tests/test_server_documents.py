"""The language server's text model and framing, without a process: code units per encoding,
changes of a range, ``file:`` URIs, and frames read from bytes."""

from __future__ import annotations

import io
import os

import pytest

from fixer.server.documents import UTF8, UTF16, UTF32, Codec, changed, on_disk
from fixer.server.jsonrpc import FrameError, RpcError, read_message


@pytest.mark.parametrize(("encoding", "units"), [(UTF16, 4), (UTF8, 7), (UTF32, 3)])
def test_columns_count_the_clients_code_units(encoding, units):
    codec = Codec(encoding)
    assert codec.units("aé😀") == units
    assert codec.column("aé😀b\n", units) == 3  # and back: the character after the emoji
    assert codec.column("ab\r\n", 99) == 2  # clamped to the line's end, its break excluded


def test_a_range_change_replaces_its_span_only():
    text = "x = 1\r\ny = '😀'\rz = 3\n"
    change = {"range": {"start": {"line": 1, "character": 7}, "end": {"line": 2, "character": 1}}, "text": "!"}
    assert changed(text, change, Codec(UTF16)) == "x = 1\r\ny = '😀! = 3\n"  # the quote, the \\r and z went
    assert changed(text, {"text": "whole"}, Codec()) == "whole"
    with pytest.raises(RpcError):
        changed(text, {"range": {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}}, "text": ""}, Codec())


@pytest.mark.skipif(os.sep != "/", reason="POSIX paths")
def test_file_uris_name_their_paths():
    assert on_disk("file:///tmp/a%20b/train.py") == "/tmp/a b/train.py"
    assert on_disk("file:///C:/work/train.py") == "c:/work/train.py"
    assert on_disk("file://server/share/train.py") == "//server/share/train.py"
    assert on_disk("untitled:Untitled-1") is None and on_disk("file:///tmp/tr%00ain.py") is None


def test_frames_are_read_one_by_one():
    stream = io.BytesIO(b'Content-Length: 2\r\n\r\n{}\r\nContent-Length: 3\r\nContent-Type: x\r\n\r\n[1]Content-Length: 4\r\n\r\n{no}'
                        b'Content-Length: 10\r\n\r\n{"cut"')
    assert read_message(stream) == {}
    assert read_message(stream) == [1]
    with pytest.raises(FrameError):
        read_message(stream)
    assert read_message(stream) is None  # cut off by the end of input
