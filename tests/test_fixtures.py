"""Text tests generated from fixtures/: before -> after exactly, after is a fixpoint, ok stays
byte-identical, and ``# expect: GFxxx`` markers name exactly the diagnostic lines. Each rule is
run alone, then all rules together over every fixture (overlapping edits, cross-rule false
positives)."""

from __future__ import annotations

import ast

import pytest

from fixer.engine import Options, process_source
from fixer.registry import all_rules
from tests.fixture_cases import discover
from tests.helpers import expected_markers, fixed_text, rule_for_module, run, strip_markers

CASES = discover()
BEFORE = [c for c in CASES if c.before]
OK = [c for c in CASES if c.ok]
AFTER = [c for c in CASES if c.after]


def _ids(cases):
    return [c.id for c in cases]


@pytest.mark.parametrize("case", BEFORE, ids=_ids(BEFORE))
def test_before_is_fixed_to_after(case):
    assert case.after is not None, f"{case.before.name} needs {case.name}.after.py"
    rule = rule_for_module(case.rule_module)
    source = case.before.read_text(encoding="utf-8")
    result = run(case.before, [rule])
    assert not result.errors, result.errors
    lines = sorted((d.line, d.code) for d in result.diagnostics)
    assert lines == expected_markers(source), "diagnostic lines differ from the # expect: markers"
    assert strip_markers(fixed_text(result, source)) == case.after.read_text(encoding="utf-8")
    assert result.remaining == [] and result.refused == [], "the rule's own finding is not gone"


@pytest.mark.parametrize("case", AFTER, ids=_ids(AFTER))
def test_after_is_a_fixpoint(case):
    rule = rule_for_module(case.rule_module)
    result = run(case.after, [rule])
    assert not result.errors, result.errors
    assert not result.changed, "a second pass changes the fixed code"
    assert [d for d in result.diagnostics if d.fix] == [], "fixed code still has fixable findings"


@pytest.mark.parametrize("case", OK, ids=_ids(OK))
def test_ok_is_left_alone(case):
    result = run(case.ok, [rule_for_module(case.rule_module)])
    assert not result.errors, result.errors
    assert result.diagnostics == [], f"false positive: {result.diagnostics}"
    assert not result.changed
    assert expected_markers(case.ok.read_text(encoding="utf-8")) == [], "ok fixtures carry no # expect: markers"


CORRECT = [c.ok for c in OK] + [c.after for c in AFTER]


@pytest.mark.parametrize("path", CORRECT, ids=[f"{p.parent.name}/{p.name}" for p in CORRECT])
def test_all_rules_together_stay_silent_on_correct_code(path):
    result = run(path, all_rules())
    assert not result.errors, result.errors
    assert result.diagnostics == [], f"another rule fires on correct code: {result.diagnostics}"


@pytest.mark.parametrize("case", BEFORE, ids=_ids(BEFORE))
def test_all_rules_together_converge(case):
    source = case.before.read_text(encoding="utf-8")
    result = run(case.before, all_rules())
    assert not result.errors, result.errors
    out = fixed_text(result, source)
    ast.parse(out)
    assert result.remaining == [] and result.refused == [], "a finding is left after fixing with all rules"
    again = process_source(str(case.before), out.encode("utf-8"), Options(rules=all_rules(), fix=True, unsafe=True))
    assert not again.changed, "all rules together do not reach a fixpoint"
    assert again.diagnostics == [], "a rule reports something on the fixed text"


@pytest.mark.parametrize("case", BEFORE, ids=_ids(BEFORE))
def test_other_rules_do_not_pile_on(case):
    """Where one bug could be described by two rules, only the one naming the cause reports it."""
    own = rule_for_module(case.rule_module).code
    result = run(case.before, all_rules(), fix=False)
    assert {d.code for d in result.diagnostics} == {own}
