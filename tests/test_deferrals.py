"""A rule defers to another through a fact of the analysis (``undetached_fake_lines`` for GF103,
``early_step_lines`` for GF202), not by running the other rule: that fact must name exactly the
lines the other rule reports, on every fixture where it reports anything."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from codemods.fake_not_detached_for_discriminator import FakeNotDetachedForDiscriminator
from codemods.step_before_backward import StepBeforeBackward
from fixer.analysis.early_steps import early_step_lines
from fixer.analysis.undetached_fakes import undetached_fake_lines, undetached_fakes
from fixer.context import FileContext

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("fake_not_detached_for_discriminator", "step_before_backward", "zero_grad_between_backward_and_step",
           "separate_backward_through_shared_graph", "subgraph_built_before_loop", "step_between_forward_and_backward",
           "discriminator_backward_into_generator")
FILES = sorted(p for folder in FOLDERS for p in (ROOT / "fixtures" / folder).glob("*.py"))


def _context(path: Path) -> FileContext:
    text = path.read_text()
    return FileContext(str(path), text, ast.parse(text))


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_the_deferral_facts_name_the_lines_the_rules_report(path: Path):
    found = list(undetached_fakes(_context(path)))
    reported = {d.line for d in FakeNotDetachedForDiscriminator().check(_context(path))}
    assert {f.reads[0].lineno for f in found} == reported
    # the fact also names the calls that run a reported helper's discriminator step (GF105 defers there)
    assert undetached_fake_lines(_context(path)) == reported | {f.step.lineno for f in found if f.step is not None}
    assert early_step_lines(_context(path)) == {d.line for d in StepBeforeBackward().check(_context(path))}


def test_the_facts_are_not_empty_everywhere():
    """The comparison above means something: both rules report on their own fixtures."""
    gan = ROOT / "fixtures" / "fake_not_detached_for_discriminator"
    early = ROOT / "fixtures" / "step_before_backward"
    assert any(undetached_fake_lines(_context(p)) for p in gan.glob("*.before.py"))
    assert any(early_step_lines(_context(p)) for p in early.glob("*.before.py"))
