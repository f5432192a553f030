"""Discovery of fixture cases: ``fixtures/<rule_module>/NAME.{before,after,ok,oracle}.py``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
KINDS = ("before", "after", "ok", "oracle")


@dataclass(frozen=True)
class Case:
    rule_module: str  # folder name == codemods module name
    name: str
    before: Optional[Path] = None
    after: Optional[Path] = None
    ok: Optional[Path] = None
    oracle: Optional[Path] = None

    @property
    def id(self) -> str:
        return f"{self.rule_module}/{self.name}"


def _split(path: Path) -> tuple[str, str]:
    stem = path.name[: -len(".py")]
    name, _, kind = stem.rpartition(".")
    return name, kind


def discover(root: Path = FIXTURES) -> list[Case]:
    """Every case of every fixture folder, sorted; unknown file kinds raise."""
    cases: list[Case] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        found: dict[str, dict[str, Path]] = {}
        for path in sorted(folder.glob("*.py")):
            name, kind = _split(path)
            if kind not in KINDS:
                raise ValueError(f"{path}: fixture files are NAME.{{{','.join(KINDS)}}}.py")
            found.setdefault(name, {})[kind] = path
        cases.extend(Case(folder.name, name, **kinds) for name, kinds in sorted(found.items()))
    return cases
