"""What a checked file's name, a message or quoted source must not send to a terminal: control
characters (ESC starts sequences that recolour, hide or retitle), line breaks, bidirectional
overrides. Each is written as its escape (``\\x1b``)."""

from __future__ import annotations

import re

UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with each character a terminal would act on written as its escape (``\\x1b``)."""
    return UNPRINTABLE.sub(lambda m: ascii(m.group())[1:-1], text)
