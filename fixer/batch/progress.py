"""Progress on stderr while files are checked: repositories and files done, findings so far,
rate and time left. Shown only when stderr is a terminal (rich, which typer brings); otherwise,
and with --no-progress, --quiet or --silent, nothing is printed."""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from fixer.engine import FileResult


class Progress:
    def __init__(self, files: Sequence[str], owners: Sequence[int], repositories: int, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self._bar = None
        if not self.enabled:
            return
        self._owner = dict(zip(files, owners))
        self._left = [0] * repositories  # files not done yet, per repository
        for owner in owners:
            if owner >= 0:
                self._left[owner] += 1
        self._repos_done = sum(1 for left in self._left if left == 0)
        self._repositories = repositories
        self._findings = 0
        self._total = len(files)

    def __enter__(self) -> "Progress":
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeRemainingColumn

            self._bar = Bar(
                TextColumn("graphfix"), BarColumn(), MofNCompleteColumn(), TextColumn("files{task.fields[repos]}"),
                TextColumn("{task.fields[findings]} finding(s)"), TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(), console=Console(stderr=True), transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task("", total=self._total, repos=self._repos_text(), findings=0, rate="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)

    def advance(self, result: FileResult) -> None:
        if self._bar is None:
            return
        self._findings += len(result.diagnostics)
        owner: Optional[int] = self._owner.get(result.path)
        if owner is not None and owner >= 0:
            self._left[owner] -= 1
            self._repos_done += self._left[owner] == 0
        speed = self._bar.tasks[0].speed
        rate = f"{speed:.0f} files/s" if speed else ""
        self._bar.update(self._task, advance=1, repos=self._repos_text(), findings=self._findings, rate=rate)

    def _repos_text(self) -> str:
        return f", {self._repos_done}/{self._repositories} repositories" if self._repositories else ""
