#!/usr/bin/env python3
"""Refactoring invariance of ``graphfix run``: a diagnosis must not disappear when the code is moved.

Every fixture the run diagnoses (its rule, at any line) is refactored by each transformation of
tests/invariance_gen.py (the loop body into a function or a trainer method, code into a second
module, values through a dict/tuple/attribute, an always-true guard), and each variant runs under
the sanitizer, as ``graphfix run`` runs it:

  diagnosed   bug variants whose run reports the fixture's rule (of those whose original does)
  silent      ok variants (ok and after files) whose run reports nothing (of those whose original is)

A variant that behaves differently from its original (a generator failure, see
benchmarks/invariance.py) can show as a miss here: read the misses (``--misses``).

    python benchmarks/runtime_invariance.py [--only SUBSTR ...] [--transform SUBSTR ...] [--misses]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fixture_cases import discover  # noqa: E402
from tests.invariance_check import generate  # noqa: E402
from tests.invariance_gen import TRANSFORMS  # noqa: E402
from tests.sanitized import Pool  # noqa: E402
from tests.test_runtime_fixtures import RULES, WATCHED  # noqa: E402


def measure(cases: list, transforms: tuple = (), root: Optional[Path] = None) -> tuple[dict, list[str]]:
    """Per transformation, the counts of the table; and each miss, in words."""
    codes = {**RULES, **WATCHED}
    counts: dict = collections.defaultdict(collections.Counter)
    misses: list[str] = []
    pool = Pool()
    try:
        with tempfile.TemporaryDirectory(prefix="graphfix-run-invariance-") as tmp:
            jobs = [j for j in generate(cases, root or Path(tmp), {}) if not transforms or any(part in j.transform for part in transforms)]
            pool.submit(sorted({getattr(j.case, j.kind) for j in jobs}))
            pool.submit(j.folder / j.variant.main for j in jobs)
            for job in jobs:
                code = codes[job.case.rule_module]
                original = pool.run(getattr(job.case, job.kind), timeout=300)
                found = {f[0] for f in pool.run(job.folder / job.variant.main, timeout=300).findings}
                if job.kind == "before" and code in {f[0] for f in original.findings}:
                    counts[job.transform]["bug variants"] += 1
                    counts[job.transform]["diagnosed"] += code in found
                    if code not in found:
                        misses.append(f"not diagnosed {job.transform} {job.case.id}: got {sorted(found) or 'nothing'} ({job.folder})")
                elif job.kind != "before" and not original.findings:
                    counts[job.transform]["ok variants"] += 1
                    counts[job.transform]["silent"] += not found
                    if found:
                        misses.append(f"flagged {job.transform} {job.case.id}.{job.kind}: {sorted(found)} ({job.folder})")
    finally:
        pool.close()
    return counts, misses


def runtime_cases(only: tuple = ()) -> list:
    codes = {**RULES, **WATCHED}
    return [c for c in discover() if c.rule_module in codes and (not only or any(part in c.id for part in only))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=(), help="only cases whose id contains one of these strings")
    parser.add_argument("--transform", nargs="*", default=(), help="only transformations whose name contains one of these strings")
    parser.add_argument("--misses", action="store_true", help="print each bug variant not diagnosed and each ok variant flagged")
    args = parser.parse_args()
    started = time.perf_counter()
    cases = runtime_cases(tuple(args.only))
    counts, misses = measure(cases, tuple(args.transform))
    if args.misses:
        print("\n".join(misses))
    print(f"{len(cases)} cases, {time.perf_counter() - started:.0f} s\n")
    print("| transformation | diagnosed / bug variants | silent / ok variants |\n| --- | ---: | ---: |")
    for transform in TRANSFORMS:
        row = counts.get(transform)
        if row:
            print(f"| {transform} | {row['diagnosed']}/{row['bug variants']} | {row['silent']}/{row['ok variants']} |")
    total = sum(counts.values(), collections.Counter())
    print(f"| all | {total['diagnosed']}/{total['bug variants']} | {total['silent']}/{total['ok variants']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
