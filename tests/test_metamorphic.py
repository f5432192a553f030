"""Metamorphic checks (issue 8) on a deterministic sample of the fixtures: renamed local names,
opaque data producers and added statements that touch nothing must not change any finding.
``python benchmarks/metamorphic.py`` runs every fixture."""

from __future__ import annotations

import ast

import pytest

from tests.fixture_cases import discover
from tests.metamorphic import TRANSFORMATIONS, accepted, check

CASES = discover()
# cases whose findings once hung on a name, a producer or a statement's absence: always checked
ONCE_FRAGILE = {
    "graph_carried_across_iterations/noop_detach_loop_with_retain",
    "graph_carried_across_iterations/repackage_hidden",
    "graph_carried_across_iterations/state_of_module_known_by_its_optimizer",
    "loss_accumulated_with_graph/average_meter",
    "loss_accumulated_with_graph/meters_in_a_dict",
    "loss_accumulated_with_graph/meter_update_takes_item",
    "loss_accumulated_with_graph/lightning_training_step_outputs",
    "loss_accumulated_with_graph/module_named_parameter_given_plain_function",
    "loss_accumulated_with_graph/trainer_metric_lists",
    "loss_accumulated_with_graph/two_files",
    "missing_zero_grad/grad_scaler",
    "missing_zero_grad/reset_by_other_name",
    "needless_retain_graph/dqn_learn_from_transitions",
    "needless_retain_graph/batches_given_at_construction",
    "needless_retain_graph/gan_detached_fake",
    "needless_retain_graph/penalty_kept_on_module_field",
    "needless_retain_graph/regularizer_built_once",
    "separate_backward_through_shared_graph/trunk_heads_losses_loop",
    "graph_carried_across_iterations/trainer_keeps_first_features",
    "zero_grad_between_backward_and_step/loss_helper",
    "zero_grad_between_backward_and_step/manual_backward_then_zero_grad",
}
SAMPLE = [case for index, case in enumerate(CASES) if index % 5 == 0 or case.id in ONCE_FRAGILE]


def test_the_sample_holds_every_once_fragile_case():
    assert ONCE_FRAGILE <= {case.id for case in SAMPLE}


@pytest.mark.parametrize("case", SAMPLE, ids=lambda case: case.id)
def test_findings_do_not_depend_on_names_producers_or_inert_statements(case):
    mismatches = [str(m) for _, m in check(case) if m is not None and not accepted(m)]
    assert not mismatches, "\n".join(mismatches)


SOURCE = """import torch

def train(model, opt, steps):
    for step in range(steps):
        x = torch.randn(4, 3)
        loss = model(x).sum()
        loss.backward()
        opt.step()
"""


def test_each_transformation_changes_the_program_as_it_says():
    variants = {(v.transformation, v.label): v for name in TRANSFORMATIONS for v in TRANSFORMATIONS[name](SOURCE)}
    for variant in variants.values():
        ast.parse(variant.source)
        assert variant.source != SOURCE
    assert "def TRAIN_(MODEL_, OPT_, STEPS_)" in variants[("rename", "upper")].source
    assert "loss.backward()" not in variants[("rename", "opaque")].source
    imported = variants[("opaque", "imported")].source
    assert "from datapkg import make_batch" in imported and "x = make_batch(4, 3)" in imported
    assert "Variable(torch.Tensor(4, 3))" in variants[("opaque", "legacy")].source
    added = variants[("added", "print")]
    lines = added.source.splitlines()
    assert lines[lines.index("        loss.backward()") - 1].strip().startswith("print(")
    # before each statement of the function (1) and the loop (4), after each body (both at line 9)
    assert added.inserted == (4, 5, 6, 7, 8, 9, 9)
    assert added.shifted([(7, "GF000")]) == [(7 + 4, "GF000")]


def test_names_inside_f_strings_are_renamed_too():
    """Before Python 3.12 an f-string is one token: its fields are renamed by hand, its literal text,
    the strings inside a field, attributes and format specs are not."""
    source = 'def f(loss, d):\n    print(f"loss {loss.item():.4f} {d[\'loss\']} {{loss}} {loss!r} {[loss for _ in d]}")\n'
    variant = next(v for v in TRANSFORMATIONS["rename"](source) if v.label == "upper").source
    assert variant == 'def F_(LOSS_, D_):\n    print(f"loss {LOSS_.item():.4f} {D_[\'loss\']} {{loss}} {LOSS_!r} {[LOSS_ for __ in D_]}")\n'
