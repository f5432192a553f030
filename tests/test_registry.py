"""Every rule is complete: documented, with fixtures, a unique valid code and a matching name."""

from __future__ import annotations

from collections import Counter

import pytest

from fixer.registry import all_rules
from fixer.rule import CODE_RE, DOC_HEADINGS, NAME_RE
from tests.fixture_cases import FIXTURES, discover

RULES = all_rules()
MIN_BEFORE, MIN_OK = 1, 1


def test_there_are_rules():
    assert len(RULES) >= 1


def test_codes_and_names_are_unique():
    assert [c for c, n in Counter(r.code for r in RULES).items() if n > 1] == []
    assert [c for c, n in Counter(r.name for r in RULES).items() if n > 1] == []


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_rule_is_complete(rule):
    module = rule.__module__.split(".")[-1]
    assert CODE_RE.match(rule.code), f"{rule.code}: codes are GF + three digits"
    assert NAME_RE.match(rule.name), f"{rule.name}: names are kebab-case"
    assert module == rule.name.replace("-", "_"), "module name = rule name with underscores"
    assert rule.summary and "\n" not in rule.summary
    assert rule.fix_safety in ("safe", "unsafe", "mixed", "none")
    doc = rule.documentation
    positions = [doc.find(heading) for heading in DOC_HEADINGS]
    assert -1 not in positions, f"docstring lacks {[h for h, p in zip(DOC_HEADINGS, positions) if p < 0]}"
    assert positions == sorted(positions), "docstring headings out of order"
    cases = [c for c in discover() if c.rule_module == module]
    assert sum(1 for c in cases if c.before) >= MIN_BEFORE, f"fixtures/{module}/ needs before/after cases"
    assert sum(1 for c in cases if c.ok) >= MIN_OK, f"fixtures/{module}/ needs ok cases"


def test_every_fixture_folder_has_a_rule():
    modules = {r.__module__.split(".")[-1] for r in RULES}
    folders = {p.name for p in FIXTURES.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert folders - modules == set()


def test_rules_page_is_up_to_date():
    """docs/rules.md is generated from the docstrings: `graphfix rules --output-format markdown > docs/rules.md`."""
    from fixer.cli import rules_page

    page = (FIXTURES.parent / "docs" / "rules.md").read_text(encoding="utf-8")
    assert page == rules_page(), "docs/rules.md is stale: regenerate it"
