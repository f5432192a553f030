"""What the engine is asked (Options) and what it answers per file (FileResult): kept apart from
the engine so that a run served from the result cache imports neither the engine nor a rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from fixer.rule import Diagnostic, Rule


@dataclass(frozen=True)
class Options:
    rules: tuple[type[Rule], ...]
    fix: bool = False  # compute fixed text (for --diff and --fix)
    unsafe: bool = False
    write: bool = False  # write fixed text back (--fix on files)
    verbose: bool = False
    max_file_size: int = 8 * 1024 * 1024  # bytes; ast needs ~100-200x a file's size in memory


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)  # as found in the original text
    remaining: list[Diagnostic] = field(default_factory=list)  # after fixing (== diagnostics if not fixing)
    original: Optional[str] = None  # set when fixed differs
    fixed: Optional[str] = None
    errors: list[str] = field(default_factory=list)
    internal: bool = False  # one of the errors is a bug of ours (a rule crash, a refused fix): exit 2, not 123
    warnings: list[tuple[int, int, str]] = field(default_factory=list)  # (line, column, message): bad suppressions
    parsed: bool = False
    written: bool = False  # --fix: this run replaced the file on disk
    cells: list[tuple[int, str, str]] = field(default_factory=list)  # notebooks: (cell, before, after) changed

    @property
    def changed(self) -> bool:
        return self.fixed is not None and self.fixed != self.original
