#!/usr/bin/env python3
"""Batch benchmark: the training corpus trees as a batch of repositories (issue 12).

Runs `graphfix --repos-in TREES --unsafe-fixes --patch-dir TMP --report TMP/report.json` (every
fix computed and written as one patch per repository; the trees are not changed) and prints wall
time, repositories per minute, peak memory of the largest process, and the time 10,000 such
repositories would take on this machine at the measured rate, and on a dask cluster of N workers.

The cluster projection assumes what `--scheduler` does: one task per repository, one worker per
core, tasks spread evenly (many more repositories than workers), each repository costing what it
cost here (the time in its files, summed over workers: the report's `seconds`), and the client's
own part (start-up, discovery, patches, report) staying on one machine. That part is estimated
as wall - (time in files / worker processes): an upper bound, since it also holds this run's
load imbalance. Projected = max(10,000 x cost per repository / N, the costliest repository: one
task runs on one worker) + 10,000 x client part per repository.

    python benchmarks/batch.py [--trees ~/.cache/graphfix-bench/training] [--repeat 1] [--jobs 0]
        [--workers 8,64,512] [--scheduler tcp://host:8786]   # --scheduler: measure on a real cluster

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


def measure(trees: str, jobs: int, scheduler: str = "") -> dict:
    with tempfile.TemporaryDirectory(prefix="graphfix-batch-") as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [sys.executable, "-m", "fixer", "--repos-in", trees, "--unsafe-fixes", "--patch-dir", os.path.join(tmp, "patches"),
               "--report", report, "--jobs", str(jobs), "-q"] + (["--scheduler", scheduler] if scheduler else [])
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
        "largest_s": max((r["seconds"] for r in data["repositories"]), default=0.0),
        "repos_per_min": repos / result.wall * 60,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", default=DEFAULT_TREES, help="a folder whose sub-folders are the repositories")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=0, help="worker processes (0: all cores)")
    parser.add_argument("--workers", default="8,64,512", help="cluster sizes to project for (comma-separated)")
    parser.add_argument("--scheduler", default="", help="run the batch on this dask cluster (graphfix --scheduler)")
    args = parser.parse_args()
    if not os.path.isdir(args.trees):
        sys.exit(f"{args.trees}: no such folder (run benchmarks/training_trees.py first)")
    runs = [measure(args.trees, args.jobs, args.scheduler) for _ in range(args.repeat)]
    best = min(runs, key=lambda r: r["wall_s"])
    hours = PROJECT / best["repos_per_min"] / 60
    print(f"cores: {os.cpu_count()}; jobs: {args.jobs or 'all'}; runs: {len(runs)} (best shown)")
    print(f"repositories: {best['repositories']}, files scanned: {best['files']}, findings: {best['findings']}, "
          f"fixes in patches: {best['fixes']}, patches: {best['patches']}, errors (files not parsed): {best['errors']}")
    walls = ", ".join(f"{r['wall_s']:.1f}" for r in runs)
    print(f"wall: {best['wall_s']:.1f} s (all runs: {walls}); "
          f"time in files, summed over workers: {best['file_seconds']:.1f} s")
    whose = "the client's; the workers' are the cluster's" if args.scheduler else "largest process"
    print(f"repositories per minute: {best['repos_per_min']:.1f}; peak memory ({whose}): {best['peak_mib']:.0f} MiB")
    where = f"the cluster at {args.scheduler}" if args.scheduler else "this machine"
    print(f"projected for {PROJECT:,} repositories like these on {where}: {hours:.1f} h")
    if not args.scheduler:
        project_cluster(best, args.jobs or os.cpu_count() or 1, [int(n) for n in args.workers.split(",")])


def project_cluster(best: dict, processes: int, sizes: list) -> None:
    """The cluster projection of the module docstring."""
    cost = best["file_seconds"] / best["repositories"]
    client = max(0.0, best["wall_s"] - best["file_seconds"] / processes) / best["repositories"]
    print(f"per repository: {cost:.3f} s of work in its files; client part (upper bound) {client:.3f} s")
    print(f"costliest repository: {best['largest_s']:.1f} s (no cluster finishes sooner: a repository is one task)")
    for workers in sizes:
        work = max(PROJECT * cost / workers, best["largest_s"])
        seconds = work + PROJECT * client
        print(f"projected for {PROJECT:,} repositories on a dask cluster of {workers} single-core workers: "
              f"{seconds / 60:.1f} min ({work / 60:.1f} min of work + {PROJECT * client / 60:.1f} min on the client)")


if __name__ == "__main__":
    main()
