#!/usr/bin/env python3
"""Naming metamorphic check on real files: every local name renamed (upper-cased, capitalised as
`G_loss`, prefixed and suffixed, opaque `n0`) must change no finding.

    python benchmarks/metamorphic_corpus.py DIR_OR_FILE...   # figures, then each mismatch

Each file (one that says `backward`) is analysed alone, copied into an empty folder, and so is
each renamed variant: the check is about what the analysis reads in the file, not about the
project around it (a rename in one file would break the imports of the others). Exit 1 on any
mismatch."""

from __future__ import annotations

import argparse
import ast
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Iterator, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixer.engine import Options, process_source  # noqa: E402
from fixer.registry import all_rules  # noqa: E402
from tests.metamorphic import RENAMINGS, local_names, rename  # noqa: E402

RULES = tuple(all_rules())


def python_files(paths: list[str]) -> Iterator[Path]:
    for path in map(Path, paths):
        if path.is_file():
            yield path
        else:
            yield from sorted(p for p in path.rglob("*.py") if p.is_file())


def findings(source: str, folder: str) -> list[tuple[int, str]]:
    result = process_source(os.path.join(folder, "module.py"), source.encode("utf-8"), Options(rules=RULES))
    return sorted((d.line, d.code) for d in result.diagnostics)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args(argv)
    runs, failed, files, found, skipped = Counter(), Counter(), 0, 0, 0
    with tempfile.TemporaryDirectory(prefix="graphfix-metamorphic-") as folder:
        for path in python_files(args.paths):
            try:
                source = path.read_text(encoding="utf-8")
                if "backward" not in source:
                    continue
                expected = findings(source, folder)
            except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
                continue  # not a file this check can read or rename
            files += 1
            found += len(expected)
            for label, how in RENAMINGS.items():
                try:
                    variant = rename(source, how)
                    left = {n.id for n in ast.walk(ast.parse(variant)) if isinstance(n, ast.Name)} & local_names(ast.parse(source))
                except Exception:  # a token stream tokenize cannot round-trip
                    continue
                if left:
                    skipped += 1
                    continue  # names inside f-strings (one token before Python 3.12) keep their old spelling
                got = findings(variant, folder)
                runs[label] += 1
                if got != expected:
                    failed[label] += 1
                    print(f"{label:>11}  {path}: {expected} -> {got}")
    print(f"{files} files with backward, {found} findings; {skipped} variants skipped (names in f-strings)")
    for label in RENAMINGS:
        print(f"{label:>11}: {failed[label]} of {runs[label]} variants changed findings")
    return 1 if sum(failed.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
