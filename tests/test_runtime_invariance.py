"""``graphfix run`` under refactoring (benchmarks/runtime_invariance.py measures every fixture):
on a sample of cases that once failed, each bug variant is still diagnosed with the fixture's
rule and each correct variant runs silent — a step function's local that shares a global's name,
a holder the loop hands to a method, a module run through a package."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="graphfix run executes the programs, which need torch")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from runtime_invariance import measure, runtime_cases  # noqa: E402

SAMPLE = (
    "fake_not_detached_for_discriminator/dcgan_detached",  # T1: the step function's g_loss and the loop's g_loss
    "loss_accumulated_with_graph/meters_in_a_dict",  # T3 package: the program runs through runpy
    "loss_accumulated_with_graph/several_running_totals",  # T2: totals handed to a method
    "graph_carried_across_iterations/tensor_memory_bank",
    "subgraph_built_before_loop/retain_graph_band_aid_with_optimizer",
)


def test_diagnoses_survive_refactoring() -> None:
    cases = runtime_cases(SAMPLE)
    assert len(cases) == len(SAMPLE)
    counts, misses = measure(cases)
    assert misses == []
    total = sum(counts.values(), collections.Counter())
    assert total["bug variants"] >= 20 and total["ok variants"] >= 20, total
