"""GF110 through an object the loop reads from: a field an object's constructor fills from a
module it is handed (``self.vectors = embedding(ids)``), served by a generator method whose
slices the loop iterates (a loop variable is an element of what the loop iterates; a method's
``yield`` is what it returns). No fix is offered there: whether an optimizer trains the module
decides between building it without recording and computing it where it is read. The look-alikes
build it without recording, or per batch. Each program is run too: the claim about it is its own
behaviour."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.program_findings import findings, run_program

PROGRAMS = Path(__file__).resolve().parent / "setup_graph_programs"
BUG = PROGRAMS / "corpus_embedded_at_construction.py"
LOOK_ALIKES = [PROGRAMS / "corpus_embedded_without_grad.py", PROGRAMS / "corpus_embedded_per_batch.py"]



def test_a_field_filled_by_a_handed_module_and_served_by_a_generator_is_a_setup_graph() -> None:
    found = findings(BUG)
    assert [(d.code, d.line) for d in found] == [("GF110", 11)]
    assert "builds a graph once, when the object is set up" in found[0].message
    assert not found[0].fix


@pytest.mark.parametrize("path", LOOK_ALIKES, ids=lambda p: p.stem)
def test_the_field_built_without_recording_or_per_batch_is_left_alone(path: Path) -> None:
    assert findings(path) == []


def test_the_programs_behave_as_claimed() -> None:
    pytest.importorskip("torch")
    assert "backward through the graph a second time" in run_program(BUG).stderr
    outputs = {run_program(path).stdout for path in LOOK_ALIKES}
    assert len(outputs) == 1 and outputs.pop().strip()
