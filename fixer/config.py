"""``[tool.graphfix]`` in pyproject.toml: every command-line option can be set there.

Looked up from the current directory upward (or given with ``--config``); command-line flags win."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(Exception):
    pass


@dataclass
class Settings:
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    unsafe_fixes: bool = False
    exclude: list[str] = field(default_factory=list)
    respect_gitignore: bool = True
    jobs: int = 0  # 0: all cores
    output_format: str = "text"


_LISTS = {"select", "ignore", "exclude"}


def find_pyproject(start: Path) -> Optional[Path]:
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load(path: Optional[Path]) -> Settings:
    settings = Settings()
    if path is None:
        return settings
    try:
        with open(path, "rb") as handle:
            table: dict[str, Any] = tomllib.load(handle).get("tool", {}).get("graphfix", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
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
        setattr(settings, attr, value)
    return settings
