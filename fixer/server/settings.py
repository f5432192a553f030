"""What the server checks a buffer with: the editor's settings (initializationOptions and
workspace/didChangeConfiguration) over the ``[tool.graphfix]`` of the nearest pyproject.toml, as
command-line flags win over it in the CLI."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from fixer.config import ConfigError, find_pyproject, load, parse_size
from fixer.hierarchy import ignored_in
from fixer.engine import Options
from fixer.registry import select_rules, unknown_selectors


@dataclass(frozen=True)
class EditorSettings:
    """None: not set in the editor, so pyproject.toml (or the default) decides."""

    select: Optional[tuple[str, ...]] = None
    ignore: Optional[tuple[str, ...]] = None
    unsafe_fixes: Optional[bool] = None


def _key(name: str) -> str:
    return name.replace("-", "").replace("_", "").lower()  # unsafeFixes, unsafe-fixes, unsafe_fixes


def editor_settings(raw: Any) -> tuple[EditorSettings, list[str]]:
    """Settings from the editor, flat or under ``settings`` and/or ``graphfix`` keys; problems are
    returned, never raised: a bad setting must not stop the server."""
    for wrapper in ("settings", "graphfix"):  # {"settings": {"graphfix": {...}, "otherServer": {...}}}
        if isinstance(raw, dict) and isinstance(raw.get(wrapper), dict):
            raw = raw[wrapper]
    if raw is None:
        return EditorSettings(), []
    if not isinstance(raw, dict):
        return EditorSettings(), [f"settings must be an object, not {type(raw).__name__}"]
    values: dict[str, Any] = {}
    problems = []
    for name, value in raw.items():
        key = _key(name)
        if key in ("select", "ignore"):
            if isinstance(value, str):
                value = value.split(",")
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                problems.append(f"setting {name} must be a list of rule codes, prefixes or names")
                continue
            values[key] = tuple(v.strip() for v in value if v.strip())
        elif key == "unsafefixes":
            if not isinstance(value, bool):
                problems.append(f"setting {name} must be true or false")
                continue
            values["unsafe_fixes"] = value
        else:
            problems.append(f"unknown setting {name} (known: select, ignore, unsafeFixes)")
    return EditorSettings(**values), problems


def options_for(path: Optional[Path], editor: EditorSettings) -> tuple[Options, list[str]]:
    """Options for the file at ``path`` (None: a buffer not on disk) and the problems met on the way."""
    problems = []
    config = find_pyproject(path.parent) if path else None
    try:
        settings = load(config)
    except ConfigError as exc:
        problems.append(f"{exc}; using the defaults")
        config, settings = None, load(None)
    except (ValueError, RecursionError, OSError) as exc:  # not UTF-8, nested too deep: told, never fatal
        problems.append(f"{config}: cannot read: {type(exc).__name__}: {exc}; using the defaults")
        config, settings = None, load(None)
    select = list(editor.select if editor.select is not None else settings.select)
    ignore = list(editor.ignore if editor.ignore is not None else settings.ignore)
    if config is not None and path is not None:
        ignore += ignored_in(settings.per_file_ignores, str(config.parent.absolute()), str(path.absolute()))
    bad = unknown_selectors(select + ignore)
    if bad:
        problems.append(f"unknown rule selector(s): {', '.join(bad)} (see `graphfix rules`); left out")
        select, ignore = [s for s in select if s not in bad], [s for s in ignore if s not in bad]
    size = parse_size(settings.max_file_size)  # load() checked it
    unsafe = settings.unsafe_fixes if editor.unsafe_fixes is None else editor.unsafe_fixes
    return Options(rules=tuple(select_rules(select, ignore)), unsafe=unsafe, max_file_size=size), problems
