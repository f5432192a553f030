#!/usr/bin/env python3
"""Batch benchmark: the training corpus trees as a batch of repositories (issue 12).

Runs `graphfix --repos-in TREES --unsafe-fixes --patch-dir TMP --report TMP/report.json` (every
fix computed and written as one patch per repository; the trees are not changed) and prints wall
time, repositories per minute, peak memory of the largest process, and the time 10,000 such
repositories would take on this machine at the measured rate.

    python benchmarks/batch.py [--trees ~/.cache/graphfix-bench/training] [--repeat 1] [--jobs 0]

The trees come from `python benchmarks/training_trees.py` (benchmarks/README.md). Stdlib only.
"""
import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run import run_measured  # noqa: E402  (a sibling script)

DEFAULT_TREES = os.path.expanduser("~/.cache/graphfix-bench/training")
PROJECT = 10_000


def measure(trees: str, jobs: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="graphfix-batch-") as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [sys.executable, "-m", "fixer", "--repos-in", trees, "--unsafe-fixes", "--patch-dir", os.path.join(tmp, "patches"),
               "--report", report, "--jobs", str(jobs), "-q"]
        result = run_measured(cmd, cwd=os.path.dirname(HERE), keep_stdout=False)
        if result.code not in (0, 1, 123):
            sys.exit(f"graphfix failed (exit {result.code}):\n{result.stderr}")
        with open(report) as handle:
            data = json.load(handle)
        patches = len(os.listdir(os.path.join(tmp, "patches")))
    repos = data["repositories_count"]
    return {
        "wall_s": result.wall, "peak_mib": result.peak_mib, "repositories": repos, "files": data["files"],
        "findings": data["findings"], "fixes": data["fixes_applied"], "errors": data["errors"], "patches": patches,
        "file_seconds": sum(r["seconds"] for r in data["repositories"]),
        "repos_per_min": repos / result.wall * 60,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", default=DEFAULT_TREES, help="a folder whose sub-folders are the repositories")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=0, help="worker processes (0: all cores)")
    args = parser.parse_args()
    if not os.path.isdir(args.trees):
        sys.exit(f"{args.trees}: no such folder (run benchmarks/training_trees.py first)")
    runs = [measure(args.trees, args.jobs) for _ in range(args.repeat)]
    best = min(runs, key=lambda r: r["wall_s"])
    hours = PROJECT / best["repos_per_min"] / 60
    print(f"cores: {os.cpu_count()}; jobs: {args.jobs or 'all'}; runs: {len(runs)} (best shown)")
    print(f"repositories: {best['repositories']}, files scanned: {best['files']}, findings: {best['findings']}, "
          f"fixes in patches: {best['fixes']}, patches: {best['patches']}, errors (files not parsed): {best['errors']}")
    walls = ", ".join(f"{r['wall_s']:.1f}" for r in runs)
    print(f"wall: {best['wall_s']:.1f} s (all runs: {walls}); "
          f"time in files, summed over workers: {best['file_seconds']:.1f} s")
    print(f"repositories per minute: {best['repos_per_min']:.1f}; peak memory (largest process): {best['peak_mib']:.0f} MiB")
    print(f"projected for {PROJECT:,} repositories like these on this machine: {hours:.1f} h")


if __name__ == "__main__":
    main()
