"""The user stack of a recorded op (fixer.runtime.sites.user_stack): the walk stops at the
second user frame and takes what lies above it from that frame's table, so the answer must be
the whole walk's wherever the second frame waits, and whoever resumes a generator."""

from __future__ import annotations

import sys
from pathlib import Path

from fixer.runtime.sites import _walked, forget_frames, user_stack

SOURCE = Path(__file__).read_text().splitlines()


def line(marker: str) -> int:
    return next(n for n, text in enumerate(SOURCE, 1) if text.endswith(f"# {marker}"))


def here() -> tuple:
    """The stack of the line that called this helper: its own frame is the innermost."""
    frame = sys._getframe(1)
    assert user_stack(frame) is _walked(frame)  # the interned stack of the whole walk
    return user_stack(frame)


def helper() -> tuple:
    return here()  # in helper


def two_calls_of_one_live_frame() -> list:
    return [helper(), helper()]  # first call (both from one line)


def test_one_live_caller_at_two_lines_gives_two_stacks() -> None:
    first = helper()  # call A
    second = helper()  # call B
    assert [s[0][1] for s in (first, second)] == [line("in helper")] * 2
    assert [s[1][1] for s in (first, second)] == [line("call A"), line("call B")]
    one, two = two_calls_of_one_live_frame()
    assert one is two  # the same place: one interned stack


def resumed() -> object:
    while True:
        yield helper()  # in the generator


def test_a_generator_resumed_from_two_lines_is_walked_from_its_resumer() -> None:
    gen = resumed()
    first = next(gen)  # resume A
    second = next(gen)  # resume B
    assert [s[1][1] for s in (first, second)] == [line("in the generator")] * 2
    assert [s[2][1] for s in (first, second)] == [line("resume A"), line("resume B")]


def test_a_frame_that_returned_is_not_held_past_forget_frames() -> None:
    import gc
    import weakref

    class Token:
        pass

    def caller() -> weakref.ref:
        token = Token()
        helper()  # held: the second user frame of helper's stack
        return weakref.ref(token)

    ref = caller()
    forget_frames()
    gc.collect()
    assert ref() is None
