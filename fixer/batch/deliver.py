"""After a batch run: the text output grouped per repository, one patch per repository, one
branch per clean git repository, and the report."""

from __future__ import annotations

import os
from typing import Callable, Optional, Sequence, TextIO

from fixer.batch import branches, changes, report
from fixer.batch.units import Repository
from fixer.engine import FileResult
from fixer.output import render


def print_grouped(repos: Sequence[Repository], results: Sequence[FileResult], owners: dict[str, int], attr: str, unsafe: bool, stream: TextIO) -> int:
    """The text report, one block per repository with findings, under a heading line. Returns
    the number of findings printed."""
    by_repo: dict[int, list] = {}
    for result in results:
        for d in getattr(result, attr):
            by_repo.setdefault(owners.get(result.path, -1), []).append((result.path, d))
    count = 0
    for index in sorted(by_repo, key=lambda i: (i < 0, i)):
        items = sorted(by_repo[index], key=lambda item: (item[0], item[1].sort_key))
        files = len({path for path, _ in items})
        name = repos[index].name if index >= 0 else "(no repository)"
        stream.write(f"== {name}: {len(items)} finding(s) in {files} file(s)\n")
        stream.write(render("text", items, unsafe))
        count += len(items)
    return count


def deliver(
    repos: Sequence[Repository], results: Sequence[FileResult], owners: dict[str, int], *, fix: bool, unsafe: bool,
    patch_dir: Optional[str], branch: Optional[str], say: Callable[[str], None],
) -> tuple[list[report.Summary], bool]:
    """Patches and branches; the summaries (with what became of each repository's changes) and
    whether something went wrong (a patch or a branch that could not be made)."""
    summaries = report.summarize(repos, results, owners, fix)
    per_repo: dict[int, list[FileResult]] = {}
    for result in results:
        per_repo.setdefault(owners.get(result.path, -1), []).append(result)
    failed = False
    taken: set[str] = set()
    earlier = _patches_in(patch_dir)
    for index, repo in enumerate(repos):
        if not (patch_dir or branch) or not summaries[index].files_changed:
            continue
        found, problems = changes.changes(repo, per_repo.get(index, []), fix)
        for problem in problems:
            say(f"{repo.name}: {problem}")
        summaries[index].errors.extend(problems)
        failed = failed or bool(problems)
        if patch_dir:
            try:
                written = changes.write_patch(patch_dir, changes.patch_name(repo, taken), found)
            except OSError as exc:
                failed = True
                say(f"{repo.name}: error: cannot write the patch: {exc.strerror or exc}")
                continue
            if written:
                summaries[index].outcome.append(f"patch {os.path.basename(written)}")
                earlier.discard(os.path.basename(written))
        if branch:
            try:
                outcome = branches.make_branch(repo.git_root, branch, found, message(branch, found))
            except branches.GitError as exc:
                failed, outcome = True, f"error: {exc}"
            summaries[index].outcome.append(outcome)
            say(f"{repo.name}: {outcome}")
    for name in sorted(earlier):  # not this run's: it may no longer apply
        say(f"graphfix: warning: {os.path.join(patch_dir or '', name)} is left from an earlier run, not written by this one")
    return summaries, failed


def usable_outputs(patch_dir: Optional[str], report_file: Optional[str]) -> Optional[str]:
    """Before a batch runs: the patch folder is made (or is a folder) and the report's folder
    exists, so that hours of work are not lost to a typo at the end. The problem, or None."""
    if patch_dir:
        try:
            os.makedirs(patch_dir, exist_ok=True)
        except OSError as exc:
            return f"--patch-dir {patch_dir}: {exc.strerror or exc}"
    if report_file:
        folder = os.path.dirname(os.path.abspath(report_file))
        if not os.path.isdir(folder):
            return f"--report {report_file}: no such folder: {folder}"
        if os.path.isdir(report_file):
            return f"--report {report_file}: is a folder"
    return None


def _patches_in(folder: Optional[str]) -> set[str]:
    try:
        return {name for name in os.listdir(folder) if name.endswith(".patch")} if folder else set()
    except OSError:
        return set()


def message(branch: str, found: Sequence[changes.Change]) -> str:
    findings = [line for change in found for line in change.findings]
    lines = [f"Fix {len(findings)} autograd graph-lifetime finding(s) (graphfix)", ""]
    lines.append(f"Made by `graphfix --branch {branch}`; [*] safe fix, [-] fix that may change gradients, no mark: no fix.")
    lines.append("")
    lines.extend(f"- {line}" for line in findings)
    return "\n".join(lines) + "\n"
