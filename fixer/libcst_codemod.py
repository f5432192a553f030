"""graphfix as a command of LibCST's codemod runner (the ``libcst`` extra), for teams that run
their migrations through it:

    python -m libcst.tool codemod -x fixer.libcst_codemod.GraphfixCommand --no-format src/

or, with ``modules: [fixer]`` in ``.libcst.codemod.yaml``, ``codemod libcst_codemod.GraphfixCommand``.
The runner finds the files, runs them in parallel and prints its diffs (``-u``) and summary; each
file is fixed by graphfix's own engine, on its text, exactly as ``graphfix --fix`` fixes it: the
same rules, the nearest ``[tool.graphfix]`` config, safe fixes unless ``--unsafe-fixes``, the same
self-checks. LibCST only re-parses the fixed text. Every finding is a warning of the runner
(``path:line:col: GFxxx [*] message``; ``[-]``: its fix needs ``--unsafe-fixes``). A file graphfix
cannot check is skipped with the reason; a fix refused by the engine's self-check fails the file."""

from __future__ import annotations

import argparse
import os
from functools import lru_cache
from pathlib import Path
from typing import Optional

import libcst as cst
from libcst.codemod import CodemodCommand, CodemodContext, SkipFile

from fixer.config import ConfigError, find_pyproject
from fixer.engine import Options, process_source
from fixer.hierarchy import ConfigTree, Flags, Resolved
from fixer.output import text_lines
from fixer.registry import unknown_selectors


class GraphfixCommand(CodemodCommand):
    DESCRIPTION = "graphfix: fix PyTorch autograd graph-lifetime bugs with graphfix's engine (safe fixes unless --unsafe-fixes)."

    @staticmethod
    def add_args(arg_parser: argparse.ArgumentParser) -> None:
        arg_parser.add_argument("--unsafe-fixes", action="store_true", default=None, help="Also apply fixes that change gradients.")
        arg_parser.add_argument("--select", default=None, help="Rule codes, prefixes or names to enable (comma-separated).")
        arg_parser.add_argument("--ignore", default=None, help="Rule codes, prefixes or names to disable (comma-separated).")

    def __init__(self, context: CodemodContext, unsafe_fixes: Optional[bool] = None, select: Optional[str] = None,
                 ignore: Optional[str] = None) -> None:
        super().__init__(context)
        bad = unknown_selectors(list(_split(select) or ()) + list(_split(ignore) or ()))
        if bad:
            raise ValueError(f"graphfix: unknown rule selector(s): {', '.join(bad)} (see `graphfix rules`)")
        self.flags = Flags(select=_split(select), ignore=_split(ignore), unsafe_fixes=unsafe_fixes, base=Options(rules=(), fix=True))

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        path = os.path.abspath(self.context.filename or "-")
        options = _resolved(self.flags, path).options(path, None)
        result = process_source(path, tree.bytes, options)
        for line in text_lines([(path, d) for d in result.diagnostics], options.unsafe):
            self.warn(line)
        if result.errors:
            if result.internal:  # a rule crash or a fix that broke the code: the engine's bug, the file fails
                raise RuntimeError(f"graphfix: {'; '.join(result.errors)}")
            raise SkipFile(f"graphfix: {'; '.join(result.errors)}")
        if not result.changed:
            return tree
        return cst.parse_module(result.fixed, config=tree.config_for_parsing)


def _split(value: Optional[str]) -> Optional[tuple[str, ...]]:
    return None if value is None else tuple(part.strip() for part in value.split(",") if part.strip())


@lru_cache(maxsize=None)
def _tree(flags: Flags) -> ConfigTree:
    """Configs are read once per runner process; the fallback is found from the current folder."""
    return ConfigTree(flags, fallback=find_pyproject(Path.cwd()))


def _resolved(flags: Flags, path: str) -> Resolved:
    tree = _tree(flags)
    resolved = tree.for_file(path)
    if resolved is None:  # its config is broken
        raise ConfigError("; ".join(tree.errors.values()))
    return resolved

