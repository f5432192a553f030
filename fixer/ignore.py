"""git's ignore rules, read from the ignore files themselves. git is never run, so nothing a
checked repository configures (core.fsmonitor, hooks, filters, aliases) can execute.

Covered: `.gitignore` in every folder of a repository (a deeper file wins over a shallower one, the
last matching line of a file wins, `!` re-includes), `.git/info/exclude` (below every .gitignore),
nested repositories (each with only its own rules), `.git` files of worktrees and submodules.
A folder is a repository root when it holds `.git`; ignore files outside any repository are not
applied. Not covered: `core.excludesFile`, and files git tracks although they match a pattern
(git lists those; we skip them)."""

from __future__ import annotations

import os
import re
from typing import Iterable, NamedTuple, Optional, Sequence

from pathspec import GitIgnoreSpec

from fixer.source import SourceError, read_bytes


class Layer(NamedTuple):
    """One ignore file. A walked path ``rel`` (relative to the folder given on the command line)
    is seen by this file as ``prefix + rel[strip:]``, relative to the file's folder."""

    spec: GitIgnoreSpec
    strip: int
    prefix: str


class Rules(NamedTuple):
    in_repository: bool
    layers: tuple[Layer, ...]


NO_RULES = Rules(False, ())


def compile_patterns(lines: Iterable[str]) -> GitIgnoreSpec:
    """A spec from gitignore lines; a line git would not understand is dropped, as git drops it."""
    lines = list(lines)
    try:
        return GitIgnoreSpec.from_lines(lines)
    except ValueError:
        patterns = []
        for line in lines:
            try:
                patterns.extend(GitIgnoreSpec.from_lines([line]).patterns)
            except ValueError:
                continue
        return GitIgnoreSpec(patterns)


def _read_spec(path: str) -> Optional[GitIgnoreSpec]:
    try:
        text = read_bytes(path).decode("utf-8", "surrogateescape")
    except SourceError:  # missing, unreadable, or not a regular file (a FIFO would hang)
        return None
    spec = compile_patterns(re.split(r"\r?\n", text))  # as git: only \n ends a line (not form feed)
    return spec if len(spec) else None


def _git_dir(repo: str) -> Optional[str]:
    """The folder holding info/exclude: ``.git``, or where a ``.git`` file (``gitdir: ...``) points,
    or that folder's ``commondir`` (linked worktrees share the main repository's info/)."""
    dot_git = os.path.join(repo, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    try:
        text = read_bytes(dot_git).decode("utf-8", "surrogateescape").strip()
    except SourceError:
        return None
    if not text.startswith("gitdir:"):
        return None
    git_dir = os.path.join(repo, text[len("gitdir:") :].strip())
    try:
        common = read_bytes(os.path.join(git_dir, "commondir")).decode("utf-8", "surrogateescape").strip()
    except SourceError:
        return git_dir
    return os.path.join(git_dir, common)


def _info_exclude(repository: str) -> Optional[GitIgnoreSpec]:
    git_dir = _git_dir(repository)
    return _read_spec(os.path.join(git_dir, "info", "exclude")) if git_dir else None


def is_ignored(rules: Rules, rel: str, is_dir: bool) -> bool:
    """Whether git ignores ``rel`` itself (its parent folders are the walker's business)."""
    tail = "/" if is_dir else ""
    for layer in reversed(rules.layers):  # deepest file first; the first one with an opinion decides
        verdict = layer.spec.check_file(layer.prefix + rel[layer.strip :] + tail).include
        if verdict is not None:
            return verdict
    return False


def rules_inside(rules: Rules, folder: str, rel: str, names: Iterable[str]) -> Rules:
    """The rules that apply inside ``folder`` (``rel`` from the given root; ``names``: its entries)."""
    names = set(names)
    strip = len(rel) + 1 if rel else 0
    if ".git" in names:  # a repository root: the rules of an enclosing repository stop here
        exclude = _info_exclude(folder)
        rules = Rules(True, (Layer(exclude, strip, ""),) if exclude is not None else ())
    if rules.in_repository and ".gitignore" in names:
        spec = _read_spec(os.path.join(folder, ".gitignore"))
        if spec is not None:
            rules = Rules(True, (*rules.layers, Layer(spec, strip, "")))
    return rules


def rules_above(root: str) -> Rules:
    """The rules the folders above ``root`` impose inside it (``root`` itself is entered by the walker).

    When ``root`` lies in an ignored folder it was asked for explicitly, so the patterns that ignore
    it (or one of its parents) are dropped; the others still apply inside it."""
    real = os.path.realpath(root)
    chain = [real]  # root, its parent, ... up to the repository root
    while not os.path.lexists(os.path.join(chain[-1], ".git")):
        parent = os.path.dirname(chain[-1])
        if parent == chain[-1]:
            return NO_RULES  # not in a repository
        chain.append(parent)
    chain.reverse()
    if len(chain) == 1:
        return NO_RULES  # root is a repository root: rules_inside starts its rules
    specs: list[tuple[GitIgnoreSpec, str]] = []  # (spec, folder it applies from)
    exclude = _info_exclude(chain[0])
    if exclude is not None:
        specs.append((exclude, chain[0]))
    root_ignored = False
    for folder, child in zip(chain, chain[1:]):
        spec = _read_spec(os.path.join(folder, ".gitignore"))
        if spec is not None:
            specs.append((spec, folder))
        above = Rules(True, tuple(Layer(s, 0, _relative(child, base)) for s, base in specs))
        root_ignored = root_ignored or is_ignored(above, "", True)
    if root_ignored:
        specs = [(_without_matches(spec, chain, base), base) for spec, base in specs]
    return Rules(True, tuple(Layer(spec, 0, _relative(real, base) + "/") for spec, base in specs))


def _relative(path: str, base: str) -> str:
    return os.path.relpath(path, base).replace(os.sep, "/")


def _without_matches(spec: GitIgnoreSpec, chain: Sequence[str], base: str) -> GitIgnoreSpec:
    """``spec`` minus the patterns that match a folder of ``chain`` below ``base``."""
    folders = [_relative(folder, base) + "/" for folder in chain if len(folder) > len(base)]
    return GitIgnoreSpec([p for p in spec.patterns if not any(p.match_file(f) for f in folders)])
