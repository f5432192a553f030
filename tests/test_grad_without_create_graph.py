"""GF107 names the backward that really consumes the gradients: an autograd.grad taken with
respect to the fast weights starts a new gradient chain and is followed, not reported."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import rule_for_module, run

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "grad_without_create_graph"


def test_maml_inner_steps_name_the_meta_backward():
    path = FIXTURES / "maml_several_inner_steps.before.py"
    meta_line = next(n for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip() == "loss_q.backward()")
    result = run(path, [rule_for_module("grad_without_create_graph")], fix=False)
    assert len(result.diagnostics) == 2
    assert all(f"backpropagated on line {meta_line}," in d.message for d in result.diagnostics)
