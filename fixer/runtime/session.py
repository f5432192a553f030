"""One sanitized run: the recorder installed, findings collected from the errors it sees."""

from __future__ import annotations

from typing import Optional

from fixer.runtime.recorder import Call, Recorder
from fixer.runtime.report import Finding

FREED = "backward through the graph a second time"
INPLACE = "modified by an inplace operation"


class Session:
    def __init__(self, max_steps: Optional[int] = None) -> None:
        self.recorder = Recorder(max_steps=max_steps, on_error=self._on_error)
        self.findings: list[Finding] = []
        self.failures: list[str] = []  # our own diagnosis crashes, reported, never raised

    def _on_error(self, exc: RuntimeError, call: Call) -> None:
        message = str(exc)
        try:
            if FREED in message:
                from fixer.runtime.freed import diagnose
            elif INPLACE in message:
                from fixer.runtime.inplace import diagnose
            else:
                return
            finding = diagnose(self.recorder, call, message)
        except Exception as bug:  # a bug of ours must not replace the program's own error
            self.failures.append(f"{type(bug).__name__}: {bug}")
            return
        if finding is not None:
            self.findings.append(finding)

    @property
    def steps(self) -> int:
        return self.recorder.steps

    @property
    def iterations(self) -> int:
        """Training iterations begun: a backward or step line that runs again begins the next."""
        return len(self.recorder.iteration_starts) + 1 if self.recorder.calls else 0

    def __enter__(self) -> "Session":
        self.recorder.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.recorder.stop()
