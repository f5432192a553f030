"""Settings per checked file, resolved as ruff resolves them.

- The nearest config above a file decides its settings: ``.graphfix.toml``, ``graphfix.toml``, or
  a ``pyproject.toml`` with a ``[tool.graphfix]`` table, in that order within one folder
  (fixer.config.config_in; a ``pyproject.toml`` without one does not hide the one above). A file with none above
  it takes the run's fallback: the config found from the current folder upward, or the defaults.
- ``--config FILE`` decides for every file.
- Flags given on the command line win over every config.
- Paths in a config (``exclude``, ``extend-exclude``, ``per-file-ignores``) are relative to the
  folder of the config that names them; those of ``--config`` to the current folder (as ruff).

Configs are loaded once and each folder's answer is cached, so a walk asks the disk about a
folder once. A broken config found on the way is an error for the files below it only."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from fixer.config import ConfigError, Settings, config_in, load, parse_size
from fixer.engine import Options
from fixer.ignore import compile_patterns
from fixer.registry import select_rules, unknown_selectors


@dataclass(frozen=True)
class Flags:
    """What the command line says (None: not given, so the config decides)."""

    select: Optional[tuple[str, ...]] = None
    ignore: Optional[tuple[str, ...]] = None
    unsafe_fixes: Optional[bool] = None
    max_file_size: Optional[str] = None
    respect_gitignore: bool = True  # False: --no-respect-gitignore, for every folder
    force_exclude: Optional[bool] = None  # --force-exclude / --no-force-exclude
    base: Options = Options(rules=())  # fix / write / verbose for every file


class Resolved:
    """One config as it applies to the files below its folder."""

    def __init__(self, settings: Settings, config: Optional[str], base: str, flags: Flags) -> None:
        self.settings, self.config, self.base = settings, config, base
        patterns = settings.exclude + settings.extend_exclude
        self.exclude = compile_patterns(patterns) if patterns else None
        self.include = tuple(settings.include + settings.extend_include)
        self.respect_gitignore = settings.respect_gitignore and flags.respect_gitignore
        self.force_exclude = settings.force_exclude if flags.force_exclude is None else flags.force_exclude
        select = list(flags.select) if flags.select is not None else settings.select
        ignore = list(flags.ignore) if flags.ignore is not None else settings.ignore
        bad = unknown_selectors(select + ignore + [s for v in settings.per_file_ignores.values() for s in v])
        if bad:
            raise ConfigError(f"{config}: unknown rule selector(s): {', '.join(bad)} (see `graphfix rules`)")
        self._select, self._ignore = select, ignore
        unsafe = settings.unsafe_fixes if flags.unsafe_fixes is None else flags.unsafe_fixes
        size = parse_size(flags.max_file_size if flags.max_file_size is not None else settings.max_file_size)
        self._options = replace(flags.base, unsafe=unsafe, max_file_size=size)
        self._by_ignores: dict[tuple, Options] = {}

    def excluded(self, path: str, is_dir: bool) -> bool:
        rel = relative(path, self.base) if self.exclude is not None else None
        return rel not in (None, ".") and self.exclude.match_file(rel + ("/" if is_dir else ""))

    def force_excluded(self, path: str, cli_exclude=None) -> bool:
        """With force-exclude: whether ``path`` (absolute), named explicitly, is excluded: it or a
        folder above it matches this config's exclude, or ``cli_exclude`` (--exclude, relative
        to the current folder). Always False without force-exclude (as ruff)."""
        if not self.force_exclude:
            return False
        return excluded_path(self.exclude, relative(path, self.base)) or excluded_path(cli_exclude, relative(path, os.getcwd()))

    def options(self, path: str, root: Optional[str]) -> Options:
        """The engine's options for the file ``path`` (absolute) of the project at ``root``."""
        key = (ignored_in(self.settings.per_file_ignores, self.base, path), root)
        if key not in self._by_ignores:
            rules = tuple(select_rules(self._select, self._ignore + list(key[0])))
            self._by_ignores[key] = replace(self._options, rules=rules, root=root)
        return self._by_ignores[key]


def relative(path: str, base: str) -> Optional[str]:
    """``path`` (absolute) relative to ``base``, with '/'; None when outside it."""
    rel = os.path.relpath(path, base)
    return None if rel == ".." or rel.startswith(".." + os.sep) else rel.replace(os.sep, "/")


def excluded_path(spec, rel: Optional[str]) -> bool:
    """Whether the file ``rel`` (relative, '/'), or a folder above it, matches ``spec``."""
    if spec is None or rel in (None, "."):
        return False
    parts = rel.split("/")
    return spec.match_file(rel) or any(spec.match_file("/".join(parts[:n]) + "/") for n in range(1, len(parts)))


def ignored_in(per_file_ignores: dict[str, list[str]], base: str, path: str) -> tuple[str, ...]:
    """The rules ``per-file-ignores`` (of a config in ``base``) turns off for ``path``
    (absolute). As ruff: a pattern matches the path relative to the config's folder (``*``
    crosses ``/``) or the file's name; ``!pattern`` applies to the files it does not match."""
    if not per_file_ignores:
        return ()
    rel, name = relative(path, base), os.path.basename(path)
    found: list[str] = []
    for pattern, selectors in per_file_ignores.items():
        negated = pattern.startswith("!")
        pattern = pattern[1:] if negated else pattern
        hit = fnmatch.fnmatchcase(name, pattern) or (rel is not None and fnmatch.fnmatchcase(rel, pattern))
        if hit != negated:
            found.extend(selectors)
    return tuple(found)


class ConfigTree:
    """The settings of every folder of a run, each config loaded once."""

    def __init__(self, flags: Flags, fixed: Optional[Path] = None, fallback: Optional[Path] = None) -> None:
        """``fixed``: --config (every file). ``fallback``: the config found from the current
        folder, for files with none above them. Raises ConfigError for either."""
        self.flags = flags
        self.errors: dict[str, str] = {}  # config path -> why it cannot be used
        self._configs: dict[str, Optional[Resolved]] = {}
        self._folders: dict[str, Optional[Resolved]] = {}
        self._fixed = Resolved(load(fixed), str(fixed), os.getcwd(), flags) if fixed else None
        if fallback is not None:
            path = os.path.abspath(fallback)
            self._fallback = self._configs[path] = Resolved(load(fallback), path, os.path.dirname(path), flags)
        else:
            self._fallback = Resolved(Settings(), None, os.getcwd(), flags)

    @property
    def fallback(self) -> Resolved:
        return self._fixed or self._fallback

    def for_folder(self, folder: str) -> Optional[Resolved]:
        """The settings inside ``folder``; None when the config that decides is broken (the
        reason is in ``errors``)."""
        if self._fixed is not None:
            return self._fixed
        folder = os.path.abspath(folder)
        unknown = []
        current = folder
        while current not in self._folders:
            unknown.append(current)
            candidate = config_in(Path(current))
            if candidate is not None:
                found = self._load(str(candidate))
                break
            parent = os.path.dirname(current)
            if parent == current:
                found = self._fallback
                break
            current = parent
        else:
            found = self._folders[current]
        for seen in unknown:
            self._folders[seen] = found
        return found

    def for_file(self, path: str) -> Optional[Resolved]:
        return self.for_folder(os.path.dirname(os.path.abspath(path)))

    def _load(self, path: str) -> Optional[Resolved]:
        if path not in self._configs:
            try:
                self._configs[path] = Resolved(load(Path(path)), path, os.path.dirname(path), self.flags)
            except (ConfigError, ValueError) as exc:
                self._configs[path] = None
                self.errors[path] = str(exc)
        return self._configs[path]
