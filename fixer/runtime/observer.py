"""The detectors that watch a whole run (leaks, retained graphs, the optimizer protocol,
penalties) see the recorder's events through this interface; each keeps its own state and
hands back findings, as they happen (``findings``) or when the run ends (``finish``)."""

from __future__ import annotations

from typing import Any, Optional

from fixer.runtime.report import Finding


class Observer:
    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self.findings: list[Finding] = []

    def before_backward(self, call: Any, tensors: tuple) -> None:
        """A backward or ``autograd.grad`` call is about to walk the graphs of ``tensors``."""

    def after_backward(self, call: Any, tensors: tuple, result: Any, retain: bool, create: bool) -> None:
        """It returned; ``retain``: ``retain_graph=True`` written out, ``create``: ``create_graph``."""

    def before_step(self, optimizer: Any, call: Any) -> None:
        pass

    def after_step(self, optimizer: Any, call: Any) -> None:
        pass

    def zero_grad(self, owner: Any, call: Any) -> None:
        """``owner.zero_grad()`` (an optimizer or an ``nn.Module``) is about to run, outside any step."""

    def grad_read(self, owner: Any, grad: Any) -> None:
        """The program read ``owner.grad`` (outside library code): ``grad``, without a graph."""

    def op(self, func: Any, args: tuple, kwargs: Any, out: Any) -> None:
        """A torch call returned ``out`` (only while the observer is in ``recorder.op_watchers``)."""

    def on_error(self, message: str, call: Any) -> Optional[Finding]:
        """The program's backward or grad call raised ``message``: a finding when it is ours to explain."""
        return None

    def finish(self, whole_run: bool) -> list[Finding]:
        """The run ended; ``whole_run``: the program ran to its end (what is still alive is final)."""
        return []
