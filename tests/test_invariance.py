"""Refactoring invariance (issue 9), on a bounded sample; the full set is benchmarks/invariance.py.

1. The generator is correct: every variant of every fixture parses, and on the sample every
   variant raises what its original raises or gives its numbers.
2. No correct variant (of an ok or after file) gets a finding from any rule.
3. Every sample bug variant that kept its finding (got a correct fix) in the stored baseline
   (benchmarks/invariance_baseline.json, written by ``benchmarks/invariance.py --write-baseline``)
   still does: the rates may only grow.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixture_cases import discover
from tests.invariance_check import KINDS, analyse, generate, in_sample, judge, programs, variant_id
from tests.invariance_gen import Variant, variants

BASELINE = Path(__file__).resolve().parent.parent / "benchmarks" / "invariance_baseline.json"
CASES = discover()
SAMPLE = [case for case in CASES if in_sample(case)]


def test_every_variant_of_a_quarter_of_the_fixtures_parses() -> None:
    made = 0
    for case in CASES[::4]:
        for kind in KINDS:
            path = getattr(case, kind)
            for transform, outcome in (variants(path.read_text(encoding="utf-8")).items() if path else ()):
                if isinstance(outcome, Variant):
                    made += 1
                    for name, text in outcome.files.items():
                        ast.parse(text, filename=f"{case.id}.{kind} {transform} {name}")
                    assert outcome.main in outcome.files
    assert made > 5 * len(CASES[::4]), "most transformations apply to most fixtures"


PROGRAM = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, x):
        return self.fc(x)


model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 3), torch.randn(8, 1)
total = 0.0
for step in range(4):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    total += loss.item()
"""


def test_each_transformation_moves_the_code_it_claims_to_move() -> None:
    found = {name: outcome.files for name, outcome in variants(PROGRAM).items()}
    assert "def train_step(optimizer, model, x, y, total):" in found["T1 function"]["train.py"]
    assert "total, loss = train_step(optimizer, model, x, y, total)" in found["T1 function"]["train.py"]
    assert "self.optimizer.step()" in found["T2 method"]["train.py"] and "trainer.step(step)" in found["T2 method"]["train.py"]
    assert "total = trainer.total" in found["T2 method"]["train.py"]
    assert "from helpers import Net" in found["T3 defs module"]["train.py"] and "class Net" in found["T3 defs module"]["helpers.py"]
    assert "from .helpers import Net" in found["T3 defs package"]["pkg/train.py"]
    assert "loss = compute_loss(model, x, y)" in found["T3 loss module"]["train.py"]
    assert "out['loss'].backward()" in found["T4 dict"]["train.py"] and "out[0].backward()" in found["T4 tuple"]["train.py"]
    assert "out.loss.backward()" in found["T4 attribute"]["train.py"]
    assert "if step >= 0:" in found["T5 guard body"]["train.py"] and "if step % 1 == 0:" in found["T5 guard steps"]["train.py"]


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> Iterator[list]:
    pytest.importorskip("torch", reason="the variants are executed")
    from tests.execution import Runner

    jobs = generate(SAMPLE, tmp_path_factory.mktemp("invariance"), {})
    with Runner() as runner:
        runner.submit(programs(jobs))
        for job in jobs:
            analyse(job)
        runner.submit(programs(jobs))
        yield [(job, judge(runner, job)) for job in jobs]


def test_sample_variants_behave_like_their_originals(measured) -> None:
    failures = [f"{job.transform} {job.case.id}.{job.kind}: {v.detail}" for job, v in measured if v.status == "generator failure"]
    assert not failures, "\n".join(failures)
    assert sum(v.status in ("bug", "correct") for _, v in measured) > 5 * len(SAMPLE)


def test_no_correct_variant_gets_a_finding(measured) -> None:
    """Except the known false positives the baseline lists (their causes: benchmarks/FINDINGS.md)."""
    known = set(json.loads(BASELINE.read_text())["known_false_positives"])
    flagged = [f"{variant_id(job)}: {sorted(job.codes)}" for job, v in measured if v.status == "correct" and job.codes and variant_id(job) not in known]
    assert not flagged, "\n".join(flagged)


@pytest.mark.parametrize("what", ["kept", "fixed"])
def test_bug_variants_keep_the_baseline(measured, what: str) -> None:
    expected = set(json.loads(BASELINE.read_text())[f"ci_sample_{what}"])
    now = {variant_id(job) for job, verdict in measured if getattr(verdict, what)}
    lost = sorted(expected - now)
    assert not lost, f"bug variants that no longer get {'their finding' if what == 'kept' else 'a correct fix'}:\n" + "\n".join(lost)
