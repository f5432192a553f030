"""``--report FILE``: a summary per repository, Markdown (``.md``) for people or JSON (``.json``)
for machines: findings per rule, safe and unsafe fixes available, fixes applied (written by
--fix, or in the patch or branch), files changed, errors, time, and what became of the changes."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

from fixer import __version__, temp_files
from fixer.batch.units import Repository
from fixer.diff import display_path
from fixer.engine import FileResult

SUFFIXES = (".md", ".json")


@dataclass
class Summary:
    repository: str
    path: str
    files: int = 0  # scanned
    analysed: int = 0
    findings: int = 0
    by_rule: dict[str, int] = field(default_factory=dict)  # "GF301 loss-accumulated-with-graph" -> count
    safe_fixes: int = 0  # findings whose fix is safe
    unsafe_fixes: int = 0  # findings whose fix needs --unsafe-fixes
    fixes_applied: int = 0
    files_changed: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0  # time spent on its files, summed over workers
    outcome: list[str] = field(default_factory=list)  # the patch written, the branch made, or why not


def changed(result: FileResult, fix: bool) -> bool:
    """Whether the run changed the file (--fix: wrote it) or would (diff, patch, branch)."""
    return result.written if fix else result.changed


def summarize(repos: Sequence[Repository], results: Sequence[FileResult], owners: dict[str, int], fix: bool) -> list[Summary]:
    summaries = [Summary(repo.name, repo.root) for repo in repos]
    for result in results:
        index = owners.get(result.path, -1)
        if index < 0:
            continue
        summary = summaries[index]
        summary.files += 1
        summary.analysed += result.parsed
        summary.seconds += result.seconds
        summary.errors.extend(f"{display_path(result.path)}: {error}" for error in result.errors)
        rules = Counter(f"{d.code} {d.name}" for d in result.diagnostics)
        for rule, count in rules.items():
            summary.by_rule[rule] = summary.by_rule.get(rule, 0) + count
        summary.findings += len(result.diagnostics)
        for d in result.diagnostics:
            kind = d.fix.applicability.value if d.fix else None
            summary.safe_fixes += kind == "safe"
            summary.unsafe_fixes += kind == "unsafe"
        if changed(result, fix):
            summary.files_changed.append(os.path.relpath(result.path, repos[index].root).replace(os.sep, "/"))
            summary.fixes_applied += max(0, len(result.diagnostics) - len(result.remaining))
    return summaries


def write(path: str, summaries: Sequence[Summary], wall: float, mode: str) -> None:
    """Write the report; raises OSError when it cannot be written."""
    total = _totals(summaries, wall, mode)
    if path.endswith(".json"):
        text = json.dumps({"graphfix": __version__, **total, "repositories": [asdict(s) for s in summaries]}, indent=2) + "\n"
    else:
        text = markdown(summaries, total)
    temp_files.write_whole(path, text.encode("utf-8"))


def _totals(summaries: Sequence[Summary], wall: float, mode: str) -> dict:
    return {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "mode": mode,  # check, diff, fix, patch or branch: what "applied" means
        "wall_seconds": round(wall, 3),
        "repositories_count": len(summaries),
        "files": sum(s.files for s in summaries),
        "findings": sum(s.findings for s in summaries),
        "fixes_applied": sum(s.fixes_applied for s in summaries),
        "errors": sum(len(s.errors) for s in summaries),
    }


def markdown(summaries: Sequence[Summary], total: dict) -> str:
    lines = [
        "# graphfix batch report", "",
        f"graphfix {__version__}, {total['created']}, mode `{total['mode']}`: {total['repositories_count']} repositories, "
        f"{total['files']} files, {total['findings']} findings, {total['fixes_applied']} fixes applied, "
        f"{total['errors']} errors, {total['wall_seconds']:.1f} s.", "",
        "| repository | files | findings | safe fixes | unsafe fixes | applied | files changed | errors | time (s) | result |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for s in summaries:
        lines.append(
            f"| {_cell(s.repository)} | {s.files} | {s.findings} | {s.safe_fixes} | {s.unsafe_fixes} | {s.fixes_applied} | "
            f"{len(s.files_changed)} | {len(s.errors)} | {s.seconds:.2f} | {_cell('; '.join(s.outcome))} |"
        )
    for s in summaries:
        if not (s.by_rule or s.errors):
            continue
        lines += ["", f"## {s.repository}", ""]
        if s.by_rule:
            lines += ["| rule | findings |", "| --- | ---: |"]
            lines += [f"| {_cell(rule)} | {count} |" for rule, count in sorted(s.by_rule.items())]
        if s.files_changed:
            lines += ["", "Files changed: " + ", ".join(f"`{name}`" for name in s.files_changed)]
        if s.errors:
            lines += ["", "Errors:", ""] + [f"- {_cell(error)}" for error in s.errors]
    return "\n".join(lines) + "\n"


def _cell(text: Optional[str]) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")
