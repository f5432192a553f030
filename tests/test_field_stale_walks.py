"""GF108 across the methods of a model class (fixer/analysis/field_stale_walks.py): forward()
stores its outputs in fields, update() steps and then backpropagates a loss read from a field the
stepped module computed before the step. Reported (no fix: whether to run the forward again or to
backpropagate before the step is the author's choice); the look-alikes backpropagate before the
steps or run the forward again after them. Each program is run: the claim is its own behaviour."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fixer.engine import Options, process_source
from fixer.registry import all_rules

PROGRAMS = Path(__file__).resolve().parent / "field_walk_programs"
BUG = PROGRAMS / "latent_regression_after_encoder_step.py"
LOOK_ALIKES = [PROGRAMS / "latent_regression_before_the_steps.py", PROGRAMS / "latent_regression_after_a_new_forward.py"]


def _findings(path: Path) -> list:
    result = process_source(str(path), path.read_bytes(), Options(rules=tuple(all_rules()), fix=True, unsafe=True))
    assert not result.errors, result.errors
    return result.diagnostics


def test_a_backward_through_a_stored_forward_after_its_modules_step_is_reported() -> None:
    found = _findings(BUG)
    assert [(d.code, d.line) for d in found] == [("GF108", 32)]
    assert "stored in a field" in found[0].message and "self.opt_g.step()" in found[0].message


@pytest.mark.parametrize("path", LOOK_ALIKES, ids=lambda p: p.stem)
def test_backward_before_the_steps_or_after_a_new_forward_is_left_alone(path: Path) -> None:
    assert _findings(path) == []


def test_the_programs_behave_as_claimed() -> None:
    pytest.importorskip("torch")
    run = [subprocess.run([sys.executable, str(p)], capture_output=True, text=True, timeout=120, env={"OMP_NUM_THREADS": "1", "PATH": ""}) for p in [BUG, *LOOK_ALIKES]]
    assert "modified by an inplace operation" in run[0].stderr
    assert all(r.returncode == 0 and r.stdout.strip() for r in run[1:])
