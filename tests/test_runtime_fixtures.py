"""``graphfix run`` on the fixture programs: every bug fixture of GF101-GF106 that raises an
autograd graph error is diagnosed with its rule and its ``# expect:`` line; every ``ok`` fixture
of those rules runs silent. The programs run in two worker processes (about 25 s)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

pytest.importorskip("torch", reason="graphfix run executes the programs, which need torch")

from tests.fixture_cases import discover
from tests.sanitized import Pool, Sanitized

RULES = {
    "graph_carried_across_iterations": "GF101",
    "subgraph_built_before_loop": "GF102",
    "fake_not_detached_for_discriminator": "GF103",
    "graph_cached_on_module": "GF104",
    "separate_backward_through_shared_graph": "GF105",
    "repeated_backward": "GF106",
}
# Diagnosed, but as GF105 at the first backward: the discriminator's *output* (not the fake) is
# reused after the generator's step, and both losses' parameters overlap, so the two-player test
# does not tell the players apart yet.
# Also diagnosed with the right rule but at another line than the static finding's: the value's
# use inside a step function (static: the call that carries it), the read of a tensor buffer
# (static: the store into it), the method's use of a graph built in __init__ (static: __init__).
KNOWN_GAPS = {
    "fake_not_detached_for_discriminator/discriminator_output_reused_after_generator_step",
    "fake_not_detached_for_discriminator/discriminator_output_reused_inline_chain",
    "graph_carried_across_iterations/hidden_through_step_function",
    "graph_carried_across_iterations/tensor_memory_bank",
    "subgraph_built_before_loop/init_gram_matrix_reused",
}
GRAPH_ERRORS = ("backward through the graph a second time", "modified by an inplace operation")
CASES = [case for case in discover() if case.rule_module in RULES]


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    workers = Pool()
    workers.submit(p for case in CASES for p in (case.before, case.ok) if p)
    yield workers
    workers.close()


def expected_lines(path) -> list[int]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [number for number, text in enumerate(lines, 1) if re.search(r"#\s*expect:\s*GF\d{3}", text)]


def raised_graph_error(result: Sanitized) -> bool:
    return bool(result.findings) or any(m in result.output for m in GRAPH_ERRORS)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES if c.before])
def test_bug_fixture_is_diagnosed_with_its_rule_and_line(pool: Pool, case) -> None:
    result = pool.run(case.before)
    assert not result.failures, result.failures
    if not raised_graph_error(result):
        pytest.skip("this bug shows in its numbers or memory, not as an error (runtime checks for it are phase 2)")
    assert result.findings, f"raised a graph error but nothing was diagnosed:\n{result.output}"
    code, line, evidence = result.findings[0]
    assert result.exit_code == 1
    if case.id in KNOWN_GAPS:
        pytest.xfail(f"known gap: got {code} at line {line}")
    assert (code, line) in {(RULES[case.rule_module], n) for n in expected_lines(case.before)}, (
        f"got {code} at line {line} (evidence {evidence}), expected {RULES[case.rule_module]} at {expected_lines(case.before)}"
    )


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES if c.ok])
def test_ok_fixture_runs_silent(pool: Pool, case) -> None:
    result = pool.run(case.ok)
    assert (result.findings, result.failures, result.exit_code) == ((), (), 0), result.output
