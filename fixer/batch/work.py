"""What a run checks: each file with the engine options its config gives it and, in a batch,
the repository it belongs to."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional, Sequence

from fixer.batch.units import Repository
from fixer.discovery import Problem, discover
from fixer.engine import Options
from fixer.hierarchy import ConfigTree


@dataclass
class Work:
    files: list[str] = field(default_factory=list)
    choice: list[int] = field(default_factory=list)  # index into variants, per file
    variants: list[Options] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)  # index into the repositories, per file (-1: none)
    problems: list[Problem] = field(default_factory=list)
    problem_owners: dict[str, int] = field(default_factory=dict)  # a problem's path -> its repository
    _index: dict[Options, int] = field(default_factory=dict)

    def add(self, path: str, options: Options, owner: int) -> None:
        if options not in self._index:
            self._index[options] = len(self.variants)
            self.variants.append(options)
        self.files.append(path)
        self.choice.append(self._index[options])
        self.owners.append(owner)


def plan(
    paths: Sequence[str], repos: Optional[Sequence[Repository]], tree: ConfigTree, exclude: Sequence[str], gitignore: bool
) -> Work:
    """The files to check. Without ``repos``, ``paths`` are walked as one set of files; with
    them, each repository is walked on its own and a file belongs to the innermost repository
    holding it (each file is checked once)."""
    work = Work()
    if repos is None:
        found = discover(paths, exclude, gitignore, tree=tree)
        work.problems = found.problems
        for path in found.files:
            _add(work, tree, path, None, -1)
        return work
    claimed: set[str] = set()
    per_repo: dict[int, list[str]] = {}
    problems: dict[tuple[str, str], Problem] = {}
    for index in sorted(range(len(repos)), key=lambda i: -len(repos[i].root)):  # innermost first
        found = discover([repos[index].path], exclude, gitignore, tree=tree)
        problems.update(((os.path.normpath(p.path), p.message), p) for p in found.problems)
        work.problem_owners.update((p.path, index) for p in found.problems)
        mine = per_repo[index] = []
        for path in found.files:
            real = os.path.realpath(path)
            if real not in claimed:
                claimed.add(real)
                mine.append(path)
    work.problems = list(problems.values())
    for index, repo in enumerate(repos):
        for path in per_repo[index]:
            _add(work, tree, path, repo.root, index)
    return work


def _add(work: Work, tree: ConfigTree, path: str, root: Optional[str], owner: int) -> None:
    resolved = tree.for_file(path)
    if resolved is not None:  # else its config is broken: the tree's errors name it
        work.add(path, resolved.options(os.path.abspath(path), root), owner)
