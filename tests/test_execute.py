"""Execution tests: fixture programs run, each `before` shows its bug, each `after` keeps the
right numbers (the oracle's, or before's when before runs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Optional

import pytest

pytest.importorskip("torch", reason="execution tests run the fixture programs, which need torch")

from tests.execution import Result, Runner, compare_states, describe, is_autograd_error
from tests.fixture_cases import Case, discover
from tests.helpers import rule_for_module

CASES = discover()
KINDS = ("ok", "before", "after", "oracle")  # the order the tests below ask for programs


def cases_with(kind: str) -> list:
    return [pytest.param(case, id=case.id) for case in CASES if getattr(case, kind)]


@pytest.fixture(scope="session")
def runner() -> Iterator[Runner]:
    with Runner() as pool:
        pool.submit(getattr(case, kind) for kind in KINDS for case in CASES if getattr(case, kind))
        yield pool


def ran_cleanly(runner: Runner, path: Path, role: str) -> Result:
    result = runner.run(path)
    assert result.error is None, f"the {role} program must run without error:\n{describe(result)}"
    return result


@pytest.mark.parametrize("case", cases_with("ok"))
def test_ok_runs(runner: Runner, case: Case) -> None:
    ran_cleanly(runner, case.ok, "correct look-alike (ok)")


@pytest.mark.parametrize("case", cases_with("oracle"))
def test_oracle_runs(runner: Runner, case: Case) -> None:
    ran_cleanly(runner, case.oracle, "oracle")


@pytest.mark.parametrize("case", cases_with("before"))
def test_before_shows_bug(runner: Runner, case: Case) -> None:
    before = runner.run(case.before)
    if rule_for_module(case.rule_module).code.startswith("GF0"):
        # GF0xx rules are about graphfix's own comments: the program has no bug to show, it must
        # run, and its fix (test_after_matches_reference) must keep its numbers exactly
        assert before.error is None, describe(before)
        return
    if before.error:
        assert is_autograd_error(before.error), f"before raised, but not an autograd graph error:\n{describe(before)}"
        return
    if case.after is None:
        pytest.fail(f"{case.id}: before runs without error, so its bug can only show against {case.name}.after.py")
    after = runner.run(case.after)
    reference = runner.run(case.oracle) if case.oracle else after
    wrong_numbers = reference.error is None and compare_states(reference.state, before.state) is not None
    leaks = before.retained_nodes > after.retained_nodes or before.retained_saved > after.retained_saved
    wasted = before.unpacked > after.unpacked  # same numbers, more backward work: a walk nothing needed
    assert wrong_numbers or leaks or wasted, (
        f"{case.id}: the fixture does not demonstrate the bug: before runs without error, its numbers equal "
        f"{Path(reference.path).name}'s, it keeps {before.retained_nodes} autograd nodes and "
        f"{before.retained_saved} saved tensors alive, no more than after's {after.retained_nodes} and "
        f"{after.retained_saved}, and its backward passes read {before.unpacked} saved tensors, no more than "
        f"after's {after.unpacked}\n{describe(before)}"
    )


@pytest.mark.parametrize("case", cases_with("after"))
def test_after_matches_reference(runner: Runner, case: Case) -> None:
    after = ran_cleanly(runner, case.after, "fixed (after)")
    reference = numeric_reference(runner, case)
    if reference is None:
        pytest.fail(f"{case.id}: before raises, so the fixed numbers need a reference: add {case.name}.oracle.py")
    difference = compare_states(reference.state, after.state)
    assert difference is None, f"{case.after.name} differs from {Path(reference.path).name}: {difference}"


def numeric_reference(runner: Runner, case: Case) -> Optional[Result]:
    """The oracle if there is one, else before when it runs: a fix must not change its numbers."""
    if case.oracle:
        return ran_cleanly(runner, case.oracle, "oracle")
    before = runner.run(case.before) if case.before else None
    return before if before and before.error is None else None
