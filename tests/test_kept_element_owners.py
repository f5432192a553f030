"""GF301's kept elements through a runner the model hands itself to (fixer/analysis/kept_elements.py):
the runner's field holding the model is the model's own ``self`` given at the runner's construction
(``call_sites.field_instance``), and the runner's field named like the totals' own dict is that
runner's, never a write of the totals' field (``element_stores.numeric_readers``). The epoch's
totals then hold every batch's graph until the epoch ends: reported with ``.item()``; the look-alike
whose model returns detached terms is left alone. Each program is run: the claim is its own behaviour."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.program_findings import findings, run_program

PROGRAMS = Path(__file__).resolve().parent / "kept_element_programs"
BUG = PROGRAMS / "runner_given_owner_adds_to_totals.py"
LOOK_ALIKE = PROGRAMS / "runner_given_owner_adds_detached_totals.py"


def test_totals_added_through_a_runner_given_the_model_are_reported() -> None:
    found = findings(BUG)
    assert [(d.code, d.line) for d in found] == [("GF301", 16)]
    assert "self.totals[key] += term" in found[0].message


def test_detached_terms_through_the_same_runner_are_left_alone() -> None:
    assert findings(LOOK_ALIKE) == []


def test_the_programs_run_and_print_the_same_totals() -> None:
    pytest.importorskip("torch")
    runs = [run_program(p) for p in (BUG, LOOK_ALIKE)]
    assert all(r.returncode == 0 for r in runs)
    assert runs[0].stdout == runs[1].stdout
