"""One sanitized run: the recorder installed, findings collected from the errors it sees."""

from __future__ import annotations

import contextlib
from typing import Optional

from fixer.runtime.gradients import Gradients
from fixer.runtime.recorder import Call, Recorder
from fixer.runtime.watchers import watchers
from fixer.runtime.report import Finding
from fixer.runtime.warning_sites import at_user_lines

FREED = "backward through the graph a second time"
INPLACE = "modified by an inplace operation"


class Session:
    def __init__(self, max_steps: Optional[int] = None, whole_program: bool = False, gradients: bool = False) -> None:
        self.recorder = Recorder(max_steps=max_steps, on_error=self._on_error)
        self.findings: list[Finding] = []
        self.failures: list[str] = self.recorder.failures  # our own diagnosis crashes, reported, never raised
        self.whole_program = whole_program  # graphfix run: the end of the block is the program's end
        self.detectors = watchers(self.recorder)
        self.gradients: Optional[Gradients] = None  # which parameters the run trained (graphfix run --fix)
        if gradients:
            self.gradients = Gradients(self.recorder)
            self.recorder.observers.append(self.gradients)

    def _on_error(self, exc: RuntimeError, call: Call) -> None:
        message = str(exc)
        try:
            explained = [f for d in self.detectors if (f := d.on_error(message, call)) is not None]
            if explained:
                self.findings.extend(explained)
                return
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
        self._warnings = at_user_lines()
        self._warnings.__enter__()
        self._numbering = self.gradients.numbering() if self.gradients is not None else contextlib.nullcontext()
        self._numbering.__enter__()
        self.recorder.start()
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.recorder.stop()
        self._numbering.__exit__(None, None, None)
        self._warnings.__exit__(None, None, None)
        ended = kind is None or (isinstance(exc, SystemExit) and exc.code in (0, None))
        for detector in self.detectors:
            try:
                found = detector.findings + detector.finish(self.whole_program and ended)
                seen = {(f.code, f.filename, f.line) for f in self.findings}  # an error's diagnosis says it already
                self.findings.extend(f for f in found if not _suppressed(f) and (f.code, f.filename, f.line) not in seen)
            except Exception as bug:  # a bug of ours must not replace the program's outcome
                self.failures.append(f"{type(bug).__name__}: {bug}")
        self.recorder.program_globals = None  # (the program's objects are not kept past its run)


def _suppressed(finding: Finding) -> bool:
    """``# graphfix: ignore[...]`` at the finding's line (or for its file), as static graphfix reads it."""
    import linecache

    from fixer.suppress import find_suppressions

    return find_suppressions("".join(linecache.getlines(finding.filename))).suppresses(finding.code, finding.line, finding.line)
