"""``[tool.graphfix]`` in pyproject.toml: every command-line option can be set there.

Looked up from the current directory upward (or given with ``--config``); command-line flags win."""

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
    exclude: list[str] = field(default_factory=list)
    include: list[str] = field(default_factory=lambda: list(DEFAULT_INCLUDE))  # files a folder walk takes
    extend_include: list[str] = field(default_factory=list)
    respect_gitignore: bool = True
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


_LISTS = {"select", "ignore", "exclude", "include", "extend_include"}


def find_pyproject(start: Path) -> Optional[Path]:
    """The nearest pyproject.toml (from ``start`` upward) that configures graphfix: as ruff does,
    a pyproject.toml without a graphfix table (a package's own metadata) does not hide the one above."""
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        try:
            if candidate.is_file() and b"graphfix" in candidate.read_bytes():
                return candidate
        except OSError:
            continue
    return None


def load(path: Optional[Path]) -> Settings:
    settings = Settings()
    if path is None:
        return settings
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    tool = document.get("tool", {})
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
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise ConfigError(f"{path}: [tool.graphfix] {key} must be a list of strings")
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
