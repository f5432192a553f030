"""Which files ``graphfix run --fix`` may write: those of the program's own project.

The project is the folder of the script (for ``-m``, the folder graphfix was started in), or,
when that folder lies in a project (the nearest folder above holding ``pyproject.toml``,
``setup.py``, ``setup.cfg`` or ``.git``), that project's root. A file belongs to it when it lies
below that root and not in another project nested there (an editable install, a vendored
repository with markers of its own). Paths are compared after resolving symlinks."""

from __future__ import annotations

import os
from typing import Optional

MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def project_of(folder: str) -> Optional[str]:
    """The nearest folder at or above ``folder`` holding a project marker."""
    folder = os.path.realpath(folder)
    while True:
        if any(os.path.lexists(os.path.join(folder, marker)) for marker in MARKERS):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


class Project:
    def __init__(self, start: str) -> None:
        """``start``: the script's folder, or the current folder for ``-m``."""
        self.marked = project_of(start)
        self.root = self.marked or os.path.realpath(start)

    def holds(self, filename: str) -> bool:
        path = os.path.realpath(filename)
        if os.path.commonpath([path, self.root]) != self.root:
            return False
        return project_of(os.path.dirname(path)) == self.marked
