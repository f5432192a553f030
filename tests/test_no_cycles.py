"""An analysed file's tree is freed by reference counting when its analysis ends: a reference cycle
that holds it (a recursive closure capturing the file's context) leaves every node to the cycle
collector, whose scans of it cost a third of a run's collection time on torch's tree."""

from __future__ import annotations

import ast
import gc
from pathlib import Path

from fixer.engine import run_rules
from fixer.registry import all_rules

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = sorted(ROOT.glob("fixtures/*/*.before.py"))[::25]


def test_analysis_leaves_no_cycle_holding_the_tree():
    assert PROGRAMS
    for path in PROGRAMS:
        text = path.read_text()
        gc.collect()
        gc.disable()
        try:
            run_rules(str(path), text, all_rules(), "\n", False)
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            left = [o for o in gc.garbage if isinstance(o, ast.Module)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
        assert not left, f"{path.name}: its tree was freed only by the cycle collector"
