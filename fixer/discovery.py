"""Which files to look at. What discovery promises:

- It never runs git or anything else from the checked tree, and never opens a file that could
  block: ignore rules are read from the ignore files themselves (fixer.ignore), and only regular
  files are returned.
- A file named explicitly is checked (if it is a regular file), unless force-exclude is on
  (``--force-exclude`` or the key ``force-exclude``, ruff's) and it or a folder above it matches
  exclude: the config's patterns relative to its folder, --exclude's to the current folder. A folder is walked for
  the files `include` names (gitignore syntax; default `*.py` and `*.ipynb`), minus hidden folders, SKIP_DIRS, any folder holding `pyvenv.cfg`, what git would ignore,
  and the `exclude` patterns (gitignore syntax; a bare name matches at any depth): those given on
  the command line match the path relative to the folder given, those of a config the path
  relative to the config's folder. Each folder's include, exclude and respect-gitignore come
  from the config that decides for it (fixer.hierarchy). The given folder itself is always walked.
- Symlinked folders are not followed; a symlinked file whose target lies outside the given folder
  is skipped with a warning. Each file is returned once, even when reached through a link.
- Nothing raises: a path that cannot be used becomes a Problem, and every other path is still
  processed. The order is stable: paths in the order given, each folder's files sorted, then its
  sub-folders sorted.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple, Optional, Sequence

from pathspec import GitIgnoreSpec

from fixer.config import DEFAULT_INCLUDE
from fixer.hierarchy import ConfigTree, Resolved
from fixer.ignore import NO_RULES, Rules, compile_patterns, is_ignored, rules_above, rules_inside

SKIP_DIRS = frozenset({"__pycache__", "node_modules", "build", "dist", "site-packages", "venv", "__pypackages__"})


class Problem(NamedTuple):
    path: str
    message: str
    is_error: bool


class Discovery(NamedTuple):
    files: list[str]
    problems: list[Problem]


class _Walk:
    """One given folder: what is skipped in it, and the problems met."""

    def __init__(
        self, root: str, exclude: Optional[GitIgnoreSpec], respect_gitignore: bool, include: "_Include", tree: Optional[ConfigTree]
    ) -> None:
        self.root = root
        self.include = include
        self.real_root = os.path.realpath(root)
        self.abs_root = os.path.abspath(root)
        self.exclude = exclude
        self.respect_gitignore = respect_gitignore
        self.tree = tree
        self.problems: list[Problem] = []
        self._includes: dict[int, _Include] = {}

    def _settings(self, rel: str) -> tuple[Optional[Resolved], Optional["_Include"], bool]:
        """(config, include, whether git's ignore rules apply) inside the folder ``rel``;
        include is None when the folder's config is broken (the tree names why)."""
        if self.tree is None:
            return None, self.include, self.respect_gitignore
        resolved = self.tree.for_folder(os.path.join(self.abs_root, rel) if rel else self.abs_root)
        if resolved is None:
            return None, None, False
        include = self._includes.setdefault(id(resolved), _Include(resolved.include))
        return resolved, include, self.respect_gitignore and resolved.respect_gitignore

    def files(self) -> Iterator[tuple[str, str, bool]]:
        """(path, real path, is a symlink) of each Python file to check, in walk order."""
        rules = rules_above(self.root) if self.respect_gitignore else NO_RULES
        stack = [(self.root, "", rules)]
        while stack:
            folder, rel, rules = stack.pop()
            entries = self._scan(folder, is_root=not rel)
            if entries is None or (rel and "pyvenv.cfg" in entries):  # any virtualenv, whatever its name
                continue
            if self.respect_gitignore:
                rules = rules_inside(rules, folder, rel, entries)
            config, include, gitignore = self._settings(rel)
            if include is None:
                continue
            seen = rules if gitignore else NO_RULES
            folders = []
            for name, entry in entries.items():
                path, child = _join(folder, name), f"{rel}/{name}" if rel else name
                if entry.is_dir(follow_symlinks=False):
                    if not self._skip_folder(name, child, seen, config):
                        folders.append((path, child, rules))
                elif include.match(name, child) and not self._skip_file(child, seen, config):
                    real = self._real_file(path, child, entry)
                    if real is not None:
                        yield path, real, entry.is_symlink()
            stack.extend(reversed(folders))

    def _scan(self, folder: str, is_root: bool) -> Optional[dict[str, os.DirEntry]]:
        try:
            with os.scandir(folder) as scan:
                return {entry.name: entry for entry in sorted(scan, key=lambda entry: entry.name)}
        except OSError as exc:
            self.problems.append(Problem(folder, f"cannot read folder: {_reason(exc)}", is_root))
            return None

    def _skip_folder(self, name: str, rel: str, rules: Rules, config: Optional[Resolved]) -> bool:
        if name.startswith(".") or name in SKIP_DIRS:
            return True
        return self._skip_file(rel, rules, config, True)

    def _skip_file(self, rel: str, rules: Rules, config: Optional[Resolved], is_dir: bool = False) -> bool:
        if self.exclude is not None and self.exclude.match_file(rel + ("/" if is_dir else "")):
            return True
        if config is not None and config.excluded(os.path.join(self.abs_root, rel), is_dir):
            return True
        return is_ignored(rules, rel, is_dir)

    def _real_file(self, path: str, rel: str, entry: os.DirEntry) -> Optional[str]:
        """The real path of a regular file to check; None (with a problem when useful) otherwise."""
        if not entry.is_symlink():
            # FIFOs, sockets and devices are never opened: reading one could block forever
            return os.path.join(self.real_root, rel) if entry.is_file() else None
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:  # a broken link or a loop holds no code (editors' lock files are such links)
            self.problems.append(Problem(path, f"{_reason(exc)}; skipped", False))
            return None
        if not stat.S_ISREG(mode):
            return None
        real = os.path.realpath(path)
        if not _is_within(real, self.real_root):
            self.problems.append(Problem(path, f"symlink points outside {self.root}; skipped", False))
            return None
        return real


class _Include:
    """Which files a walk takes: ``*.ext`` patterns by suffix (fast), any other by gitignore syntax."""

    def __init__(self, patterns: Sequence[str]) -> None:
        simple = all(p.startswith("*.") and not any(c in p[2:] for c in "*?[]/\\!") for p in patterns)
        self.suffixes = tuple(p[1:] for p in patterns) if simple else None
        self.spec = None if simple else compile_patterns(patterns)

    def match(self, name: str, rel: str) -> bool:
        if self.suffixes is not None:
            return name.endswith(self.suffixes)
        return self.spec.match_file(rel)


def discover(
    paths: Iterable[str], exclude: Sequence[str] = (), respect_gitignore: bool = True, include: Sequence[str] = DEFAULT_INCLUDE,
    tree: Optional[ConfigTree] = None,
) -> Discovery:
    """The files under ``paths`` that ``include`` names, each once, in a stable order, and the
    problems met on the way. With ``tree``, each folder's config decides its include, exclude
    and respect-gitignore (``include`` is then unused)."""
    exclude_spec = compile_patterns(exclude) if exclude else None
    include_files = _Include(include)
    found: dict[str, str] = {}  # real path -> the path we report
    problems: list[Problem] = []

    def add(path: str, real: str, is_link: bool) -> None:
        if real not in found or (not is_link and os.path.islink(found[real])):
            found[real] = path  # a file and a link to it: keep one, the file's own name if seen

    for raw in paths:
        path = _clean(raw)
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            problems.append(Problem(raw, _reason(exc), True))
            continue
        if stat.S_ISDIR(mode):
            walk = _Walk(path, exclude_spec, respect_gitignore, include_files, tree)
            for file, real, is_link in walk.files():
                add(file, real, is_link)
            problems.extend(walk.problems)
        elif stat.S_ISREG(mode):
            if not _force_excluded(path, exclude_spec, tree):
                add(path, os.path.realpath(path), os.path.islink(path))
        else:
            problems.append(Problem(raw, "not a regular file", True))
    unique = {(os.path.normpath(p.path), p.message): p for p in problems}  # a path given and also walked
    return Discovery(list(found.values()), list(unique.values()))


def _force_excluded(path: str, exclude: Optional[GitIgnoreSpec], tree: Optional[ConfigTree]) -> bool:
    """A file named explicitly that force-exclude (of its config, or --force-exclude) skips."""
    resolved = tree.for_file(path) if tree is not None else None
    return resolved is not None and resolved.force_excluded(os.path.abspath(path), exclude)


def _clean(raw: str) -> str:
    """``raw`` without ``./``, doubled and trailing slashes (``..`` stays: it may follow a link)."""
    return str(Path(raw))


def _join(folder: str, name: str) -> str:
    if folder == os.curdir:
        return name
    return folder + name if folder.endswith(os.sep) else folder + os.sep + name


def _is_within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _reason(exc: OSError) -> str:
    """The errno text, as a message part: 'no such file or directory'."""
    text = exc.strerror or str(exc)
    return text[:1].lower() + text[1:]
