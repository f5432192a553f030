"""Fuzz: a few hundred generated training-loop programs with fixed seeds, all rules, unsafe fixes.

One run of the engine per program (shared by the tests below); each test asserts one oracle and,
when it fails, prints the seed, the generated input and a delta-debugged minimal input.
Reproduce one seed with `tests.fuzzgen.generate(SEED).data`; run 10,000+ with benchmarks/fuzz.py.
"""

from __future__ import annotations

import pytest

from tests.fuzzcheck import Outcome, check, reduce
from tests.fuzzgen import generate

SEEDS = range(20261123, 20261123 + 300)
ENGINE_ERRORS = ("timeout", "uncaught exception", "rule crash", "refused fix", "non-convergence", "engine cannot parse", "other error")


@pytest.fixture(scope="module")
def outcomes() -> dict[int, Outcome]:
    return {seed: check(generate(seed).data) for seed in SEEDS}


def assert_no(outcomes: dict[int, Outcome], *kinds: str) -> None:
    failing = {seed: o for seed, o in outcomes.items() if o.kinds() & set(kinds)}
    if not failing:
        return
    report = []
    for kind in kinds:
        seeds = [seed for seed, o in failing.items() if kind in o.kinds()]
        if not seeds:
            continue
        program = generate(seeds[0])
        detail = next(d for k, d in failing[seeds[0]].failures if k == kind)
        # a timeout costs LIMIT seconds per try: too slow to reduce here
        small = program.data if kind == "timeout" else reduce(program.data, kind)
        report.append(
            f"{kind}: {len(seeds)} program(s), seeds {seeds[:20]}\n"
            f"  first: seed {seeds[0]} ({program.features}): {detail[:500]}\n"
            f"  {'input' if kind == 'timeout' else 'minimal input'} (bytes): {_clip(repr(small))}"
        )
    pytest.fail("\n".join(report), pytrace=False)


def _clip(text: str, keep: int = 1500) -> str:
    return text if len(text) <= 2 * keep else f"{text[:keep]} ... ({len(text) - 2 * keep} characters) ... {text[-keep:]}"


def test_generator_is_deterministic_and_programs_compile(outcomes):
    assert generate(SEEDS[0]) == generate(SEEDS[0])
    assert all(o.compiles for o in outcomes.values())
    assert sum(o.findings > 0 for o in outcomes.values()) > 0.8 * len(SEEDS)
    assert sum(o.fixed for o in outcomes.values()) > 0.7 * len(SEEDS)


def test_no_rule_crash_refused_fix_timeout_or_other_engine_error(outcomes):
    assert_no(outcomes, *ENGINE_ERRORS)


def test_every_fixed_output_compiles(outcomes):
    assert_no(outcomes, "unparsable output")


def test_second_run_changes_nothing(outcomes):
    assert_no(outcomes, "non-idempotent")


def test_edits_only_inside_snippets_with_a_finding(outcomes):
    assert_no(outcomes, "edit outside snippets")


def test_no_fix_brings_in_a_finding(outcomes):
    assert_no(outcomes, "new finding")


def test_encoding_bom_newlines_and_final_newline_kept(outcomes):
    assert_no(outcomes, "format changed")
