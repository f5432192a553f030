"""Fuzz graphfix with N generated programs and the oracles of tests/test_fuzz.py.

    python benchmarks/fuzz.py                       # 10,000 programs from tests/fuzzgen.py
    python benchmarks/fuzz.py --seed 7 --count 500 --jobs 2 --out /tmp/fuzz-fail
    python benchmarks/fuzz.py --hypothesmith --count 2000   # surrounding code from hypothesmith

Prints one table row per program source; failing inputs are saved in --out as SEED.py, with
SEED.txt holding the failures. With --hypothesmith (if installed), each program is a
hypothesmith `from_grammar()` module with snippets spliced in before random top-level
statements and at the end.
"""

from __future__ import annotations

import argparse
import ast
import collections
import multiprocessing
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzz_snippets import SNIPPETS  # noqa: E402
from tests.fuzzcheck import check  # noqa: E402
from tests.fuzzgen import generate  # noqa: E402

COLUMNS = ("programs", "parsed", "with findings", "fixed", "timeouts", "rule crashes", "refused fixes", "non-convergence",
           "other errors", "uncaught exc.", "unparsable outputs", "non-idempotent", "edits outside snippets",
           "format changed", "new findings")
KIND_COLUMN = {"timeout": "timeouts", "rule crash": "rule crashes", "refused fix": "refused fixes", "non-convergence": "non-convergence",
               "engine cannot parse": "other errors", "other error": "other errors", "uncaught exception": "uncaught exc.",
               "unparsable output": "unparsable outputs", "non-idempotent": "non-idempotent",
               "edit outside snippets": "edits outside snippets", "format changed": "format changed",
               "new finding": "new findings"}


def hypothesmith_programs(seed: int, count: int) -> list[bytes]:
    """`count` hypothesmith modules that compile, each with snippets spliced in (deterministic)."""
    import warnings

    import hypothesmith
    from hypothesis import HealthCheck, given, settings

    modules: list[str] = []

    @settings(max_examples=count * 3, database=None, derandomize=True, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(hypothesmith.from_grammar())
    def collect(source: str) -> None:
        if len(modules) < count:
            modules.append(source)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        collect()
    rng = random.Random(seed)
    return [splice(module, rng) for module in modules]


def splice(module: str, rng: random.Random) -> bytes:
    try:
        starts = [node.lineno - 1 for node in ast.parse(module).body if node.col_offset == 0]
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        starts = []
    lines = module.splitlines(keepends=True) if "\x0c" not in module else module.split("\n")
    lines = [line if line.endswith(("\n", "\r")) else line + "\n" for line in lines]
    chosen = sorted(rng.sample(starts, min(len(starts), rng.randint(0, 2))), reverse=True)
    for number, position in enumerate([len(lines)] + chosen):
        template = rng.choice(SNIPPETS)[1].replace("_M", f"_m{number}").replace("{pre}", "")
        lines[position:position] = [template]
    return ("import torch\nfrom torch import nn\n" + "".join(lines)).encode("utf-8", "surrogatepass")


def run_one(item: tuple[int, bytes]) -> tuple[int, bytes, dict]:
    seed, data = item
    outcome = check(data)
    return seed, data, {"compiles": outcome.compiles, "findings": outcome.findings, "fixed": outcome.fixed,
                        "failures": outcome.failures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=multiprocessing.cpu_count())
    parser.add_argument("--out", type=Path, help="folder for failing inputs")
    parser.add_argument("--hypothesmith", action="store_true", help="surrounding code from hypothesmith")
    args = parser.parse_args()

    if args.hypothesmith:
        items = list(enumerate(hypothesmith_programs(args.seed, args.count), start=args.seed))
    else:
        items = ((seed, generate(seed).data) for seed in range(args.seed, args.seed + args.count))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    totals = collections.Counter({column: 0 for column in COLUMNS})
    kinds: dict[str, list[int]] = collections.defaultdict(list)
    start = time.perf_counter()
    with multiprocessing.Pool(max(1, min(args.jobs, 64))) as pool:
        for seed, data, outcome in pool.imap_unordered(run_one, items, chunksize=8):
            totals["programs"] += 1
            totals["parsed"] += outcome["compiles"]
            totals["with findings"] += outcome["findings"] > 0
            totals["fixed"] += outcome["fixed"]
            for kind in {kind for kind, _ in outcome["failures"]}:
                totals[KIND_COLUMN[kind]] += 1
                kinds[kind].append(seed)
            if outcome["failures"] and args.out:
                (args.out / f"{seed}.py").write_bytes(data)
                text = "\n".join(f"{kind}: {detail}" for kind, detail in outcome["failures"])
                (args.out / f"{seed}.txt").write_text(text + "\n", encoding="utf-8")
    elapsed = time.perf_counter() - start
    source = "hypothesmith from_grammar()" if args.hypothesmith else "tests/fuzzgen.py"
    print("| source | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---|" * len(COLUMNS))
    print(f"| {source}, seeds {args.seed}.. | " + " | ".join(f"{totals[c]:,}" for c in COLUMNS) + " |")
    print(f"\n{elapsed:.0f} s; programs counted once per failure kind.")
    for kind, seeds in sorted(kinds.items()):
        print(f"{kind}: {len(seeds)} (seeds {sorted(seeds)[:10]})")
    sys.exit(1 if kinds else 0)


if __name__ == "__main__":
    main()
