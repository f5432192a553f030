"""GF108 across the methods of a model class (fixer/analysis/field_stale_walks.py): forward()
stores its outputs in fields, update() steps and then backpropagates a loss read from a field the
stepped module computed before the step. Reported (no fix: whether to run the forward again or to
backpropagate before the step is the author's choice); the look-alikes backpropagate before the
steps or run the forward again after them. Each program is run: the claim is its own behaviour."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.program_findings import findings, run_program

PROGRAMS = Path(__file__).resolve().parent / "field_walk_programs"
BUG = PROGRAMS / "latent_regression_after_encoder_step.py"
LOOK_ALIKES = [PROGRAMS / "latent_regression_before_the_steps.py", PROGRAMS / "latent_regression_after_a_new_forward.py"]
AGAIN = PROGRAMS / "classifier_loss_backpropagated_again_after_step.py"


def test_a_backward_through_a_stored_forward_after_its_modules_step_is_reported() -> None:
    found = findings(BUG)
    assert [(d.code, d.line) for d in found] == [("GF108", 32)]
    assert "`self.generator(torch.cat([self.source, self.lat...` (line 23, stored in a field)" in found[0].message
    assert "`self.opt_g.step()` (line 38)" in found[0].message


@pytest.mark.parametrize("path", LOOK_ALIKES, ids=lambda p: p.stem)
def test_backward_before_the_steps_or_after_a_new_forward_is_left_alone(path: Path) -> None:
    assert findings(path) == []


def test_the_programs_behave_as_claimed() -> None:
    pytest.importorskip("torch")
    run = [run_program(p) for p in [BUG, *LOOK_ALIKES]]
    assert "modified by an inplace operation" in run[0].stderr
    assert all(r.returncode == 0 and r.stdout.strip() for r in run[1:])


def test_a_field_loss_backpropagated_again_is_the_freed_graph_not_a_stale_walk() -> None:
    """The second backward of the same stored loss raises on the graph the first freed (GF106):
    GF108 does not pile on, though the step changed the weights the stored forward saved."""
    assert [d.code for d in findings(AGAIN)] == ["GF106"]
    pytest.importorskip("torch")
    assert "backward through the graph a second time" in run_program(AGAIN).stderr
