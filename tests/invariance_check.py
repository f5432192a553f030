"""Measuring graphfix on refactored variants (issue 9): write each variant to its own folder, run
every rule on it as ``graphfix --fix --unsafe-fixes`` would, execute it, and judge it against the
original fixture. Shared by benchmarks/invariance.py (all fixtures) and tests/test_invariance.py
(a sample)."""

from __future__ import annotations

import ast

import shutil
import collections
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from fixer.engine import Options, process_source
from fixer.registry import all_rules
from tests.execution import Result, Runner, compare_states
from tests.fixture_cases import Case
from tests.helpers import rule_for_module
from tests.invariance_gen import Variant, variants

KINDS = ("before", "after", "ok")
SAMPLE_EVERY = 25  # tests/test_invariance.py measures about one case in 25 ...


def in_sample(case: Case) -> bool:
    """... chosen by a hash of its id, so adding fixtures leaves the old sample as it was."""
    return zlib.crc32(case.id.encode()) % SAMPLE_EVERY == 0


def variant_id(job: "Job") -> str:
    return f"{job.case.id}.{job.kind} {job.transform}"


@dataclass
class Job:
    case: Case
    kind: str  # before | after | ok
    variant: Variant
    folder: Path
    codes: set = field(default_factory=set)  # every rule's findings, over the checked files
    fixed_folder: Optional[Path] = None  # the variant after --fix --unsafe-fixes, if it changed
    errors: list = field(default_factory=list)  # engine errors (refused fixes, crashes)

    @property
    def transform(self) -> str:
        return self.variant.transform

    @property
    def code(self) -> str:
        return rule_for_module(self.case.rule_module).code


def write(variant: Variant, folder: Path, fixture: Path, texts: Optional[dict] = None) -> None:
    """The variant's files in ``folder``, with the fixture folder's packages (``project/``) beside."""
    folder.mkdir(parents=True)
    for sub in fixture.parent.iterdir():
        if sub.is_dir() and not sub.name.startswith((".", "_")):
            shutil.copytree(sub, folder / sub.name, ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in {**variant.files, **(texts or {})}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


def generate(cases: Iterable[Case], root: Path, skipped: dict) -> list[Job]:
    """A Job per applicable (fixture file, transformation); ``skipped`` counts the rest by reason."""
    jobs = []
    for case in cases:
        for kind in KINDS:
            path = getattr(case, kind)
            if path is None:
                continue
            for transform, outcome in variants(path.read_text(encoding="utf-8")).items():
                if isinstance(outcome, str):
                    key = (transform, outcome)
                    skipped[key] = skipped.get(key, 0) + 1
                    continue
                folder = root / case.rule_module / f"{case.name}.{kind}" / transform.replace(" ", "-")
                write(outcome, folder, path)
                jobs.append(Job(case, kind, outcome, folder))
    return jobs


def analyse(job: Job) -> None:
    """Every rule on every checked file, fixing with unsafe fixes; fixed files go to a sibling folder."""
    options = Options(rules=tuple(all_rules()), fix=True, unsafe=True)
    fixed = {}
    for name in job.variant.checked:
        path = job.folder / name
        result = process_source(str(path), path.read_bytes(), options)
        job.codes |= {d.code for d in result.diagnostics}
        job.errors += result.errors
        if result.changed:
            fixed[name] = result.fixed
    if fixed:
        job.fixed_folder = job.folder.with_name(job.folder.name + "-fixed")
        write(job.variant, job.fixed_folder, getattr(job.case, job.kind), fixed)


def programs(jobs: Iterable[Job]) -> list[Path]:
    """Every program to execute: originals first, then variants and fixed variants."""
    paths: list[Path] = []
    for job in jobs:
        paths += [p for p in (job.case.before, job.case.after, job.case.ok, job.case.oracle) if p]
    for job in jobs:
        paths.append(job.folder / job.variant.main)
        if job.fixed_folder:
            paths += [job.fixed_folder / job.variant.main, pretraining(job)]
    return list(dict.fromkeys(paths))


def same_behaviour(original: Result, variant: Result) -> Optional[str]:
    """None if the variant raises what the original raises, or computes the same numbers."""
    if original.error or variant.error:
        return None if original.error == variant.error else f"original raised {original.error}, variant {variant.error}"
    return compare_states(original.state, variant.state)


def runnable(runner: Runner, case: Case, kind: str) -> bool:
    """The harness can judge this fixture file: correct code runs, the numbers' reference runs."""
    own = runner.run(getattr(case, kind))
    if own.error and (kind != "before" or own.error[0] == "TimeoutError"):
        return False
    return kind != "before" or reference(runner, case) is not None


def reference(runner: Runner, case: Case) -> Optional[Result]:
    """The expert's numbers: the oracle's, else the after file's."""
    for path in (case.oracle, case.after):
        if path:
            result = runner.run(path)
            return None if result.error else result
    return None


def fix_correct(runner: Runner, job: Job) -> bool:
    """The fixed variant runs, gives the expert's numbers and keeps no more graph alive than the
    fixture's after file (the memory rules' fixes change no numbers, only what stays alive)."""
    if job.fixed_folder is None:
        return False
    fixed, expert = runner.run(job.fixed_folder / job.variant.main), reference(runner, job.case)
    if fixed.error or expert is None:
        return False
    before_training = _bound_before_training(job.fixed_folder / job.variant.main)
    if compare_states(_without(expert.state, before_training), _without(fixed.state, before_training)) is not None:
        return False
    kept = [runner.run(path) for path in _expert_programs(job)]
    kept = [result for result in kept if not result.error] or [expert]
    before = runner.run(pretraining(job))  # what the variant keeps alive before it trains
    return fixed.retained_nodes <= max(r.retained_nodes for r in kept) + before.retained_nodes and (
        fixed.retained_saved <= max(r.retained_saved for r in kept) + before.retained_saved
    )


def _expert_programs(job: Job) -> list[Path]:
    """The fixture's after file and its variant by the same transformation: what the expert's code
    keeps alive, written as the expert wrote it and as the variant is (a trainer that holds a value
    holds it in both)."""
    if not job.case.after:
        return []
    variant = job.folder.parent.with_name(f"{job.case.name}.after") / job.folder.name / job.variant.main
    return [job.case.after] + ([variant] if variant.exists() else [])


PRETRAINING = "_pretraining.py"


def pretraining(job: Job) -> Path:
    """The variant's main program cut before its first top-level loop, written beside it: the
    graphs it holds are the variant's own set-up (T2 hands a loss built there to a trainer), which
    any fix leaves alive; the memory rules' leaks grow inside the loop, after the cut."""
    path = job.folder / PRETRAINING
    if not path.exists():
        source = (job.folder / job.variant.main).read_text(encoding="utf-8")
        tree = ast.parse(source)
        loop = next((s for s in tree.body if isinstance(s, (ast.For, ast.While, ast.AsyncFor))), None)
        lines = source.splitlines(keepends=True)
        path.write_text("".join(lines[: loop.lineno - 1]) if loop else source, encoding="utf-8")
    return path


def _bound_before_training(program: Path) -> set[str]:
    """Module-level names the program binds only before its first top-level loop, and no function
    rebinds: values from before training. A refactoring that moves the loop's body into a method
    (T2) leaves such a name (``loss = criterion(model(x), y)``) as it was, where the fixture's after
    file recomputes it in the loop; the training's outcome is in the parameters and what the
    program binds later, which are compared."""
    tree = ast.parse(program.read_text(encoding="utf-8"))
    first_loop = next((i for i, s in enumerate(tree.body) if isinstance(s, (ast.For, ast.While, ast.AsyncFor))), len(tree.body))
    bound: dict[str, set[bool]] = {}
    for i, stmt in enumerate(tree.body):
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and not _in_function(stmt, node):
                bound.setdefault(node.id, set()).add(i < first_loop)
    rebound = {n for node in ast.walk(tree) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
    return {name for name, before in bound.items() if before == {True} and name not in rebound}


def _in_function(stmt: ast.stmt, node: ast.AST) -> bool:
    return any(node in ast.walk(f) for f in ast.walk(stmt) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)))


def _without(state: dict, names: set[str]) -> dict:
    """The state without those names' numbers, unless they are leaves training changes in place
    (a parameter or a ``requires_grad`` leaf: its ``.grad`` is recorded too)."""
    return {k: v for k, v in state.items() if k not in names or f"{k}.grad" in state}


@dataclass(frozen=True)
class Verdict:
    status: str  # "unrunnable", "generator failure", "bug" (a before variant) or "correct"
    kept: bool = False  # bug: the fixture's rule still reports
    fixed: bool = False  # bug: the fix gives the expert's numbers
    flagged: bool = False  # correct: some rule reports
    detail: str = ""


def judge(runner: Runner, job: Job) -> Verdict:
    if not runnable(runner, job.case, job.kind):
        return Verdict("unrunnable")
    original, variant = runner.run(getattr(job.case, job.kind)), runner.run(job.folder / job.variant.main)
    difference = same_behaviour(original, variant)
    if difference:
        return Verdict("generator failure", detail=difference)
    if job.kind == "before":
        kept = job.code in job.codes
        return Verdict("bug", kept=kept, fixed=kept and fix_correct(runner, job))
    return Verdict("correct", flagged=bool(job.codes), detail=", ".join(sorted(job.codes)))


def tally(verdicts: Iterable[tuple[Job, Verdict]]) -> dict:
    """counts[(rule code or status, transformation)][column]"""
    counts: dict = collections.defaultdict(collections.Counter)
    for job, verdict in verdicts:
        if verdict.status in ("unrunnable", "generator failure"):
            counts[verdict.status, job.transform][job.kind] += 1
            continue
        row = counts[job.code, job.transform]
        if verdict.status == "bug":
            row.update({"applicable": 1, "finding kept": int(verdict.kept), "fix correct": int(verdict.fixed)})
        else:
            row.update({"correct variants": 1, "ok flagged": int(verdict.flagged)})
    return counts


def totals(counts: dict, transform: str) -> collections.Counter:
    total: collections.Counter = collections.Counter()
    for (code, name), row in counts.items():
        if name == transform and code.startswith("GF"):
            total.update(row)
    return total
