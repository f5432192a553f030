"""``[tool.graphfix]`` in pyproject.toml, or the same keys at the top level of ``graphfix.toml`` or
``.graphfix.toml``: every command-line option can be set there.

Each checked file takes the nearest config above it (fixer.hierarchy), or the one ``--config``
names; command-line flags win. As ruff reads ``.ruff.toml``, ``ruff.toml`` and ``pyproject.toml``:
in one folder ``.graphfix.toml`` wins over ``graphfix.toml``, which wins over a pyproject.toml with
a ``[tool.graphfix]`` table (a pyproject.toml without one is no config)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


DEFAULT_INCLUDE = ("*.py", "*.ipynb")


class ConfigError(Exception):
    pass


@dataclass
class Settings:
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    unsafe_fixes: bool = False
    exclude: list[str] = field(default_factory=list)  # relative to the config's folder
    extend_exclude: list[str] = field(default_factory=list)  # the same: added to exclude
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)  # glob -> rule selectors
    include: list[str] = field(default_factory=lambda: list(DEFAULT_INCLUDE))  # files a folder walk takes
    extend_include: list[str] = field(default_factory=list)
    respect_gitignore: bool = True
    force_exclude: bool = False  # exclude also applies to paths named explicitly (ruff's force-exclude)
    jobs: int = 0  # 0: all cores
    output_format: str = "text"
    max_file_size: str = "8MB"
    cache_dir: str = ""  # "": .graphfix_cache at the project root (see fixer.cache)


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?)(?:i?b)?\s*", re.I)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str) -> int:
    """``8MB``, ``500KB``, ``1048576`` -> bytes (powers of 1024, as file managers count)."""
    match = _SIZE.fullmatch(text)
    size = int(float(match.group(1)) * _UNITS[match.group(2).lower()]) if match else 0
    if size <= 0:
        raise ValueError(f"{text!r} is not a size such as 8MB, 500KB or 1048576")
    return size


_LISTS = {"select", "ignore", "exclude", "extend_exclude", "include", "extend_include"}


def configures_graphfix(candidate: Path) -> bool:
    """Whether ``candidate`` is a pyproject.toml with a ``[tool.graphfix]`` table. One that
    mentions graphfix but does not parse counts (loading it names the error)."""
    try:
        if not candidate.is_file():
            return False
        data = candidate.read_bytes()
    except OSError:
        return False
    if b"graphfix" not in data:  # the cheap test first: most pyproject.toml files are someone else's
        return False
    try:
        tool = tomllib.loads(data.decode("utf-8")).get("tool")
    except (ValueError, RecursionError):  # not UTF-8, not TOML, nested too deep: loading names it
        return True
    return isinstance(tool, dict) and "graphfix" in tool


OWN_NAMES = (".graphfix.toml", "graphfix.toml")  # graphfix's own files: the keys at the top level


def config_in(folder: Path) -> Optional[Path]:
    """The config of ``folder`` itself, by ruff's precedence; None if it has none."""
    for name in OWN_NAMES:
        if (folder / name).is_file():
            return folder / name
    return folder / "pyproject.toml" if configures_graphfix(folder / "pyproject.toml") else None


def find_pyproject(start: Path) -> Optional[Path]:
    """The nearest config (from ``start`` upward): as ruff does, a pyproject.toml without a
    graphfix table (a package's own metadata) does not hide the one above."""
    for folder in [start, *start.parents]:
        found = config_in(folder)
        if found is not None:
            return found
    return None


def load(path: Optional[Path]) -> Settings:
    settings = Settings()
    if path is None:
        return settings
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (byte {exc.start}): a TOML file must be UTF-8") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    tool = document.get("tool", {}) if Path(path).name not in OWN_NAMES else {"graphfix": document}
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table")
    table: Any = tool.get("graphfix", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.graphfix] must be a table")
    known = {f.name for f in fields(Settings)}
    for key, value in table.items():
        attr = key.replace("-", "_")
        if attr not in known:
            raise ConfigError(f"{path}: unknown option [tool.graphfix] {key}")
        default = getattr(settings, attr)
        if attr in _LISTS:
            if not _strings(value):
                raise ConfigError(f"{path}: [tool.graphfix] {key} must be a list of strings")
        elif attr == "per_file_ignores":
            if not (isinstance(value, dict) and all(_strings(v) for v in value.values())):
                raise ConfigError(f'{path}: [tool.graphfix] {key} must map file patterns to lists of rules ("tests/*" = ["GF301"])')
        elif not isinstance(value, type(default)) or isinstance(value, bool) != isinstance(default, bool):
            raise ConfigError(f"{path}: [tool.graphfix] {key} must be a {type(default).__name__}")
        if attr == "jobs" and value < 0:
            raise ConfigError(f"{path}: [tool.graphfix] jobs must be 0 (all cores) or more")
        if attr == "max_file_size":
            try:
                parse_size(value)
            except ValueError as exc:
                raise ConfigError(f"{path}: [tool.graphfix] max-file-size: {exc}") from None
        setattr(settings, attr, value)
    return settings


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)
