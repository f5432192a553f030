#!/usr/bin/env python3
"""Refactoring invariance (issue 9): a bug must not disappear when its code is moved.

Every fixture (before, after, ok) is refactored by each transformation of
tests/invariance_gen.py (loop body into a function or a trainer method, code into a second module,
values through a dict/tuple/attribute, an always-true guard). Each variant is executed: it must
raise what the original raises or give the original's numbers, else it is a generator failure and
is left out. Then graphfix (every rule, ``--fix --unsafe-fixes``) runs on it:

  applicable     before variants that preserve the original's behaviour
  finding kept   ... on which the fixture's rule still reports
  fix correct    ... whose fixed program runs and gives the expert's numbers (oracle, else after)
  ok flagged     correct variants (of ok and after files) on which any rule reports

    python benchmarks/invariance.py                   # all fixtures (~10 min on 2 cores)
    python benchmarks/invariance.py --every 10        # every 10th case
    python benchmarks/invariance.py --write-baseline  # store the figures the CI test defends
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.execution import Runner  # noqa: E402
from tests.fixture_cases import discover  # noqa: E402
from tests.invariance_check import analyse, generate, in_sample, judge, programs, tally, totals, variant_id  # noqa: E402
from tests.invariance_gen import TRANSFORMS  # noqa: E402

BASELINE = Path(__file__).resolve().parent / "invariance_baseline.json"
COLUMNS = ("applicable", "finding kept", "fix correct", "ok flagged")


def table(counts: dict) -> str:
    codes = sorted({code for code, _ in counts if code.startswith("GF")})
    lines = ["| rule | " + " | ".join(TRANSFORMS) + " |", "| --- |" + " ---: |" * len(TRANSFORMS)]
    for code in codes + ["all"]:
        cells = []
        for transform in TRANSFORMS:
            row = totals(counts, transform) if code == "all" else counts.get((code, transform), collections.Counter())
            cells.append(f"{row['applicable']}/{row['finding kept']}/{row['fix correct']}/{row['ok flagged']}")
        lines.append(f"| {code} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rates(counts: dict) -> dict:
    """Per transformation: the counts of the table's "all" row."""
    out = {}
    for transform in TRANSFORMS:
        row = totals(counts, transform)
        out[transform] = {key.replace(" ", "_"): row[key] for key in (*COLUMNS, "correct variants")}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=int, default=1, help="only every Nth fixture case")
    parser.add_argument("--only", nargs="*", default=(), help="only cases whose id contains one of these strings")
    parser.add_argument("--write-baseline", action="store_true", help=f"store the totals and the CI sample's results in {BASELINE.name}")
    parser.add_argument("--verbose", action="store_true", help="print each generator failure and false positive")
    parser.add_argument("--transform", nargs="*", default=(), help="only transformations whose name contains one of these strings")
    parser.add_argument("--failures", action="store_true", help="print the id of each bug variant that lost its finding or its fix")
    parser.add_argument("--keep", type=Path, help="write the variants into this new folder and keep them")
    args = parser.parse_args()
    started = time.perf_counter()
    cases = [case for case in discover()[:: args.every] if not args.only or any(part in case.id for part in args.only)]
    skipped: dict = {}
    with tempfile.TemporaryDirectory(prefix="graphfix-invariance-") as tmp, Runner() as runner:
        tmp = args.keep or tmp
        jobs = generate(cases, Path(tmp), skipped)
        jobs = [job for job in jobs if not args.transform or any(part in job.transform for part in args.transform)]
        runner.submit(programs(jobs))  # the workers execute while graphfix analyses
        for job in jobs:
            analyse(job)
        runner.submit(programs(jobs))
        verdicts = [(job, judge(runner, job)) for job in jobs]
    for job, verdict in verdicts:
        where = f"{job.transform} {job.case.id}.{job.kind}: {verdict.detail} ({job.folder})"
        if verdict.flagged or (args.verbose and verdict.status == "generator failure"):
            print(("false positive " if verdict.flagged else "generator failure ") + where)
        elif args.failures and verdict.status == "bug" and not verdict.fixed:
            print(("fix wrong " if verdict.kept else "finding lost ") + variant_id(job) + f" ({job.folder})")
    counts = tally(verdicts)
    print(f"{len(cases)} cases, {len(jobs)} variants generated, {sum(skipped.values())} not applicable, "
          f"{time.perf_counter() - started:.0f} s\n")
    print("cells: applicable before variants / finding kept / fix correct / ok flagged (correct variants flagged)\n")
    print(table(counts))
    print("\ncorrect variants (ok and after files) per transformation: "
          + ", ".join(f"{t}: {totals(counts, t)['correct variants']}" for t in TRANSFORMS))
    for label in ("generator failure", "unrunnable"):
        found = {t: sum(counts[label, t].values()) for t in TRANSFORMS if counts.get((label, t))}
        print(f"{label}s: {sum(found.values())} {found if found else ''}")
    if args.write_baseline:
        sample = [(job, verdict) for job, verdict in verdicts if in_sample(job.case)]
        figures = {
            "every": args.every,
            "all": rates(counts),
            "ci_sample_kept": sorted(variant_id(job) for job, verdict in sample if verdict.kept),
            "ci_sample_fixed": sorted(variant_id(job) for job, verdict in sample if verdict.fixed),
            "known_false_positives": sorted(variant_id(job) for job, verdict in verdicts if verdict.flagged),
        }
        BASELINE.write_text(json.dumps(figures, indent=1) + "\n")
        print(f"wrote {BASELINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
