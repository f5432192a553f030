#!/usr/bin/env python3
"""Golden output of the engine: findings and fixed text for every fixture, to compare a change of
the fix machinery against (it must change neither).

For every ``fixtures/**/*.py`` and ``examples/*.py`` file, with every rule together and with the
fixture folder's own rule alone, and (before fixtures) every rule plus the wrong fix of
tests/test_fix_check.py, so that refusals are golden too; all with ``--unsafe-fixes``: the findings (code, line, column) as
found, those left after fixing (and why a fix was refused), the errors and the fixed text. A few
generated files with many findings in many scopes (and a notebook of training cells) are added.

    python benchmarks/golden.py write /tmp/golden.json
    python benchmarks/golden.py compare /tmp/golden.json      # exit 1 and name each file that differs
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.scaling import generated_notebook, generated_source  # noqa: E402
from fixer.engine import FileResult, Options, process_source  # noqa: E402
from fixer.registry import all_rules  # noqa: E402
from tests.test_fix_check import AddsRetain  # noqa: E402  a wrong fix: the refusals are golden too


def _findings(diagnostics) -> list:
    return [[d.code, d.line, d.col, d.end_line, d.end_col, d.fix_refused] for d in diagnostics]


def _record(result: FileResult) -> dict:
    return {
        "diagnostics": _findings(result.diagnostics),
        "remaining": _findings(result.remaining),
        "errors": result.errors,
        "fixed": result.fixed,
    }


def _run(name: str, data: bytes, rules) -> dict:
    return _record(process_source(name, data, Options(rules=tuple(rules), fix=True, unsafe=True)))


def inputs() -> list[tuple[str, bytes, tuple]]:
    """(name, bytes, rule codes) of every input: () means every rule."""
    found: list[tuple[str, bytes, tuple]] = []
    for path in sorted(ROOT.glob("fixtures/**/*.py")) + sorted(ROOT.glob("examples/*.py")):
        name = str(path.relative_to(ROOT))
        found.append((name, path.read_bytes(), ()))
        if path.parent.parent.name == "fixtures":
            own = [r.code for r in all_rules() if r.__module__ == f"codemods.{path.parent.name}"]
            found.append((name, path.read_bytes(), tuple(own)))
        if path.name.endswith(".before.py"):
            found.append((name, path.read_bytes(), ("*", AddsRetain.code)))
    for size in (1, 3, 12):
        found.append((f"generated_{size}.py", generated_source(size).encode(), ()))
    found.append(("generated_8.ipynb", generated_notebook(8).encode(), ()))
    return found


def golden() -> dict:
    rules = {r.code: r for r in all_rules()}
    out: dict = {}
    for name, data, codes in inputs():
        chosen = [rules[c] for c in codes] if codes and codes[0] != "*" else list(all_rules())
        if codes[1:2] == (AddsRetain.code,):
            chosen.append(AddsRetain)
        out[f"{name} [{','.join(codes) or 'all'}]"] = _run(name, data, chosen)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["write", "compare"])
    parser.add_argument("baseline")
    args = parser.parse_args()
    current = golden()
    if args.mode == "write":
        Path(args.baseline).write_text(json.dumps(current, indent=1, sort_keys=True), encoding="utf-8")
        print(f"{len(current)} runs written to {args.baseline}")
        return 0
    baseline = json.loads(Path(args.baseline).read_text(encoding="utf-8"))
    current = json.loads(json.dumps(current))  # tuples as lists, as the baseline holds them
    differ = sorted(k for k in baseline.keys() | current.keys() if baseline.get(k) != current.get(k))
    for key in differ:
        print(f"differs: {key}")
    print(f"{len(current)} runs, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
