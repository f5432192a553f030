"""The detectors that watch a whole run, installed on a recorder in one place."""

from __future__ import annotations

from typing import Any


def watchers(recorder: Any) -> list:
    from fixer.runtime.leaks import Leaks
    from fixer.runtime.penalty import Penalty
    from fixer.runtime.protocol import Protocol
    from fixer.runtime.retained import Retained

    found = [Leaks(recorder), Retained(recorder), Protocol(recorder), Penalty(recorder)]
    recorder.observers.extend(found)
    return found
