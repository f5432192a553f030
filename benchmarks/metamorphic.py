#!/usr/bin/env python3
"""Metamorphic check (issue 8): renaming every local name must not change any finding.

For every fixture (before and ok), each local name (assigned, a parameter, a def or class; not
attributes, keyword names or imports) is renamed consistently three ways: upper case, a long
prefix and suffix, and short opaque names (n0, n1, ...). The rule's findings (line, code) must be
the same. Prints each mismatch and the totals; exit 1 if any.

    python benchmarks/metamorphic.py
"""

from __future__ import annotations

import ast
import builtins
import io
import sys
import tokenize
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fixer.engine import Options, process_source  # noqa: E402
from tests.fixture_cases import discover  # noqa: E402
from tests.helpers import rule_for_module, strip_markers  # noqa: E402

KEEP = set(dir(builtins)) | {"self", "cls", "forward", "__init__", "__name__"}


def local_names(tree: ast.AST) -> set[str]:
    names, fixed = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            fixed.add(node.arg)  # f(lr=...) may be another library's parameter
        elif isinstance(node, ast.Attribute):
            fixed.add(node.attr)
        if isinstance(node, ast.ClassDef):  # methods may be framework hooks (training_step)
            fixed.update(item.name for item in node.body if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            fixed.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names - fixed - KEEP


def rename(source: str, how: Optional[Callable[[str], str]]) -> str:
    names = local_names(ast.parse(source))
    order = {name: index for index, name in enumerate(sorted(names))}
    new_name = how or (lambda name: f"n{order[name]}")
    tokens, previous = [], None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.NAME and token.string in names and not (previous and previous.string == "."):
            token = token._replace(string=new_name(token.string))
        tokens.append(token)
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = token
    return tokenize.untokenize(tokens)


RENAMINGS: dict[str, Optional[Callable[[str], str]]] = {
    "upper": lambda name: name.upper() + "_",
    "long": lambda name: f"renamed_{name}_value",
    "opaque": None,
}


def findings(path: Path, source: str, rule) -> list[tuple[int, str]]:
    result = process_source(str(path), source.encode("utf-8"), Options(rules=(rule,)))
    return sorted((d.line, d.code) for d in result.diagnostics)


def main() -> int:
    runs = mismatches = 0
    for case in discover():
        rule = rule_for_module(case.rule_module)
        for path in (case.before, case.ok):
            if path is None:
                continue
            source = strip_markers(path.read_text(encoding="utf-8"))
            expected = findings(path, source, rule)
            for label, how in RENAMINGS.items():
                runs += 1
                got = findings(path, rename(source, how), rule)
                if got != expected:
                    mismatches += 1
                    print(f"{label:>6}  {case.id} ({path.name.split('.')[-2]}): {expected} -> {got}")
    print(f"{mismatches} of {runs} renamed fixtures changed their findings")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
