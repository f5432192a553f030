"""``graphfix run``: the autograd sanitizer. Unlike static graphfix, this runs the program.

torch is imported only when a run starts (``fixer.runtime.session``), so static graphfix works
without it. ``watch()`` is the Python API: ``with graphfix.watch(): train()``."""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator, Optional, TextIO


class TorchMissing(RuntimeError):
    pass


def require_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise TorchMissing(
            f"graphfix run needs PyTorch in this Python environment ({sys.executable}), and it cannot be imported: {exc}"
        ) from exc


@contextlib.contextmanager
def watch(max_steps: Optional[int] = None, stream: Optional[TextIO] = None) -> Iterator["Session"]:  # noqa: F821
    """Sanitize the autograd calls made inside the block; findings are printed to ``stream``
    (stderr) when the block ends and kept in ``session.findings``. An error the block raises
    still propagates; ``max_steps`` ends the block quietly after that many optimizer steps."""
    require_torch()
    from fixer.runtime.stopping import StopRun, release
    from fixer.runtime.report import text_lines
    from fixer.runtime.session import Session

    session = Session(max_steps)
    try:
        with session:
            yield session
    except StopRun:
        pass
    finally:
        release()
        # printed here rather than attached to the error: a notebook shows both streams
        for line in text_lines(session.findings):
            print(line, file=stream or sys.stderr)
