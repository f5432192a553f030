#!/usr/bin/env python3
"""Metamorphic checks (issue 8) on every fixture: renamed local names, opaque data producers,
added statements that touch nothing (tests/metamorphic.py says what each does). Findings must not
change; prints the figures per transformation and per rule, and each mismatch.

    python benchmarks/metamorphic.py            # figures and mismatches
    python benchmarks/metamorphic.py --verbose  # also the reviewed lost findings
Exit 1 if any mismatch that is not a reviewed lost finding."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fixture_cases import discover  # noqa: E402
from tests.metamorphic import TRANSFORMATIONS, accepted, check  # noqa: E402


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verbose", action="store_true", help="also print the reviewed lost findings")
    args = parser.parse_args(argv)
    runs: Counter = Counter()  # (rule module or "all", transformation) -> runs
    failed: Counter = Counter()
    lost: Counter = Counter()
    for case in discover():
        for variant, mismatch in check(case):
            keys = [("all", variant.transformation), (case.rule_module, variant.transformation)]
            runs.update(keys)
            if mismatch is None:
                continue
            reviewed = accepted(mismatch)
            (lost if reviewed else failed).update(keys)
            if args.verbose or not reviewed:
                print(("reviewed lost: " if reviewed else "") + str(mismatch))
    names = list(TRANSFORMATIONS)
    print(f"{'rule':<40}" + "".join(f"{name:>22}" for name in names))
    for module in ["all"] + sorted({m for m, _ in runs} - {"all"}):
        cells = []
        for name in names:
            key = (module, name)
            cells.append(f"{failed[key]} of {runs[key]}" + (f" (+{lost[key]} lost)" if lost[key] else ""))
        print(f"{module:<40}" + "".join(f"{cell:>22}" for cell in cells))
    print("changed findings per transformation (reviewed lost findings of opaque producers in parentheses)")
    return 1 if any(failed[("all", name)] for name in names) else 0


if __name__ == "__main__":
    sys.exit(main())
