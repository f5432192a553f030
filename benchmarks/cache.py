#!/usr/bin/env python3
"""The result cache: cold and warm runs over torch's source tree and the training corpus.

For each tree: a cold run into a fresh cache folder, warm runs (median wall and CPU seconds,
each a subprocess as a user runs graphfix), a warm run with one entry missing (one file
analysed), a warm ``--diff``; then where a warm run's time goes (Python's start, graphfix's
imports, the command line, discovery, reading the index, checking entries), what the two index
layouts cost (one index file per run, or one file per entry).

    python benchmarks/cache.py [--repeat 5] [--skip-training]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TRAINING = Path.home() / ".cache/graphfix-bench/training"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
ENV.pop("GRAPHFIX_NO_CACHE", None)
ENV.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: graphfix's modules compiled once, not per run


def timed(args: list[str], cwd: str) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of the child and its workers, the process)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, env=ENV)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc


def median(args: list[str], cwd: str, repeat: int) -> tuple[float, float]:
    runs = [timed(args, cwd)[:2] for _ in range(repeat)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def index_file(cache: str) -> Path:
    """The largest index (a tree whose files all take the same settings has one)."""
    return max(Path(cache).glob("*/*.json"), key=lambda p: p.stat().st_size)


def bench_tree(name: str, tree: str, repeat: int) -> dict:
    cache = tempfile.mkdtemp(prefix="graphfix-cache-bench-")
    check = ["-m", "fixer", "-q", "--exit-zero", "--cache-dir", cache, tree]
    where = os.path.dirname(tree)  # not the tree itself: `python -m` would import its modules (torch/types.py)
    cold_wall, cold_cpu, cold = timed(check, where)
    assert cold.returncode in (0, 123), cold.stderr.decode()[-2000:]
    warm_wall, warm_cpu = median(check, where, repeat)
    warm = timed(check, where)[2]
    assert warm.stdout == cold.stdout, f"{name}: a warm run answered differently"
    path = index_file(cache)
    document = json.loads(path.read_bytes())
    entries = document["entries"]
    deps = [len(entry[0]) for entry in entries.values()]
    # one file changed: its entry gone, so it alone is analysed (the engine and rules are imported)
    analysed = max(entries, key=lambda p: entries[p][1][0])
    saved = path.read_bytes()
    del entries[analysed]
    path.write_text(json.dumps(document))
    one_wall, one_cpu, _ = timed(check, where)
    path.write_bytes(saved)
    diff_wall, diff_cpu, diff = timed(["-m", "fixer", "--diff", "--exit-zero", "--cache-dir", cache, tree], where)
    shutil.rmtree(cache)
    return {
        "tree": name, "files": len(entries) + 1, "cold s": cold_wall, "cold cpu": cold_cpu,
        "warm s": warm_wall, "warm cpu": warm_cpu, "1 miss s": one_wall, "1 miss cpu": one_cpu,
        "warm --diff s": diff_wall, "warm --diff cpu": diff_cpu,
        "diffs": diff.stdout.count(b"\n+++ "), "index MB": len(saved) / 1e6,
        "deps per entry (max)": max(deps), "deps per entry (mean)": round(statistics.mean(deps), 1),
    }


def breakdown(tree: str, repeat: int) -> dict:
    """Where a warm run's time goes: subprocess medians for the fixed costs, then the cache's own
    steps in this process."""
    from fixer.cache import RunCache
    from fixer.discovery import discover
    from fixer.engine import Options
    from fixer.registry import select_rules

    empty = tempfile.mkdtemp()
    cache = tempfile.mkdtemp(prefix="graphfix-cache-bench-")
    subprocess.run([sys.executable, "-m", "fixer", "-q", "--cache-dir", cache, tree], env=ENV, capture_output=True)
    parts = {
        "python start": median(["-c", "pass"], empty, repeat),
        "graphfix --version (imports)": median(["-m", "fixer", "--version"], empty, repeat),
        "command line, empty folder": median(["-m", "fixer", "-q", "--cache-dir", cache, empty], empty, repeat),
    }
    options = Options(rules=tuple(select_rules([], [])))  # the run's: default rules and sizes
    steps: dict[str, list[float]] = {"discovery": [], "cache key (graphfix's files)": [], "read index": [], "check entries": []}
    misses = 0
    for _ in range(repeat):
        start = time.perf_counter()
        files = discover([tree], [], True).files
        steps["discovery"].append(time.perf_counter() - start)
        start = time.perf_counter()
        warm = RunCache(cache)
        steps["cache key (graphfix's files)"].append(time.perf_counter() - start)
        start = time.perf_counter()
        warm.index(options)
        steps["read index"].append(time.perf_counter() - start)
        start = time.perf_counter()
        misses = sum(warm.lookup(path, options) is None for path in files)
        steps["check entries"].append(time.perf_counter() - start)
    parts.update({name: (statistics.median(times), None) for name, times in steps.items()})
    parts["misses"] = misses
    parts["layout"] = layouts(index_file(cache))
    shutil.rmtree(cache)
    shutil.rmtree(empty)
    return parts


def layouts(path: Path) -> dict:
    """Reading one index file against one file per entry (the sharded layout), same entries."""
    entries = json.loads(path.read_bytes())["entries"]
    shards = Path(tempfile.mkdtemp())
    for number, (name, entry) in enumerate(entries.items()):
        (shards / f"{number}.json").write_text(json.dumps({name: entry}))
    start = time.perf_counter()
    json.loads(path.read_bytes())
    one = time.perf_counter() - start
    start = time.perf_counter()
    for shard in os.scandir(shards):
        with open(shard.path, "rb") as handle:
            json.loads(handle.read())
    sharded = time.perf_counter() - start
    shutil.rmtree(shards)
    return {"one index file s": one, "one file per entry s": sharded}


def rounded(value):
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, (tuple, list)):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-training", action="store_true")
    args = parser.parse_args()
    import importlib.util

    torch_tree = importlib.util.find_spec("torch").submodule_search_locations[0]  # without importing torch
    trees = [("torch", torch_tree)] + ([] if args.skip_training or not TRAINING.is_dir() else [("training corpus", str(TRAINING))])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall times grow with it; CPU times less)")
    for name, tree in trees:
        row = bench_tree(name, tree, args.repeat)
        print(json.dumps(rounded(row), indent=1))
    parts = breakdown(torch_tree, args.repeat)
    print("warm run over torch's tree, where the time goes (wall s, CPU s):")
    print(json.dumps(rounded(parts), indent=1))


if __name__ == "__main__":
    main()
