"""The execution harness proves itself on the programs in tests/harness_programs/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the execution harness runs programs that need torch")

from tests.execution import Runner, compare_states, describe, is_autograd_error, run_program

PROGRAMS = Path(__file__).resolve().parent / "harness_programs"


@pytest.fixture(scope="module")
def runner() -> Iterator[Runner]:
    with Runner() as pool:
        pool.submit(sorted(PROGRAMS.glob("*.py")))
        yield pool


def test_double_backward_is_reported(runner: Runner) -> None:
    result = runner.run(PROGRAMS / "double_backward.py")
    assert result.error is not None and is_autograd_error(result.error), describe(result)
    assert "second time" in result.error[1]
    assert 'double_backward.py", line 8' in result.where


def test_seed002_bug_raises(runner: Runner) -> None:
    result = runner.run(PROGRAMS / "seed002_bug.py")
    assert is_autograd_error(result.error), describe(result)


def test_seed002_real_fixes_agree(runner: Runner) -> None:
    retain, recompute = runner.run(PROGRAMS / "seed002_retain.py"), runner.run(PROGRAMS / "seed002_recompute.py")
    assert retain.error is None and recompute.error is None
    assert compare_states(retain.state, recompute.state) is None
    assert retain.state["a.grad"] == [2.0, 2.0]


def test_seed002_detach_runs_but_is_caught(runner: Runner) -> None:
    retain, detach = runner.run(PROGRAMS / "seed002_retain.py"), runner.run(PROGRAMS / "seed002_detach.py")
    assert detach.error is None  # a "no exception" check would accept this fix
    assert detach.state["a.grad"] is None
    assert compare_states(retain.state, detach.state) is not None
    only_a = {key: retain.state[key] for key in ("a", "a.grad")}
    assert compare_states(only_a, {key: detach.state[key] for key in only_a}) == "a.grad: expected 2 numbers, got None"


def test_leak_retains_more_nodes(runner: Runner) -> None:
    leaky, fixed = runner.run(PROGRAMS / "leaky_total.py"), runner.run(PROGRAMS / "total_item.py")
    assert compare_states(leaky.state, fixed.state) is None  # same numbers: only the leak tells them apart
    assert leaky.retained_nodes > 20 > fixed.retained_nodes > 0


def test_tensors_in_lists_retain_nodes(runner: Runner) -> None:
    leaky, fixed = runner.run(PROGRAMS / "leaky_list.py"), runner.run(PROGRAMS / "total_item.py")
    assert leaky.retained_nodes > 20 > fixed.retained_nodes


def test_state_collects_the_programs_numbers(runner: Runner) -> None:
    result = runner.run(PROGRAMS / "collects.py")
    assert result.error is None, describe(result)
    parameters = {f"model.{layer}.{name}" for layer in (0, 2) for name in ("weight", "bias")}
    holder = "bag['holder'].tensor"
    expected = parameters | {f"{p}.grad" for p in parameters} | {holder, f"{holder}.grad", "loss", "steps"}
    assert set(result.state) == expected
    assert result.state[f"{holder}.grad"] is None and result.state["steps"] == [3.0]
    assert len(result.state["model.0.weight"]) == 4
    assert result.output == "collected\n"


def test_globals_fresh_and_seeds_reset() -> None:
    first, second = run_program(PROGRAMS / "fresh_and_seeded.py"), run_program(PROGRAMS / "fresh_and_seeded.py")
    assert first.error is None and second.error is None, describe(second)
    assert first.state == second.state and first.state["weights.grad"] is not None


def test_pool_matches_in_process_run(runner: Runner) -> None:
    pooled = runner.run(PROGRAMS / "fresh_and_seeded.py")
    assert pooled.error is None, describe(pooled)
    assert pooled.state == run_program(PROGRAMS / "fresh_and_seeded.py").state


def test_torch_state_restored_after_a_program() -> None:
    poisoned = run_program(PROGRAMS / "poisons_torch.py")
    assert poisoned.error == ("ValueError", "left torch poisoned")
    checked = run_program(PROGRAMS / "checks_torch.py")
    assert checked.error is None, describe(checked)


def test_hanging_program_times_out_and_pool_recovers(tmp_path: Path) -> None:
    hangs = tmp_path / "hangs.py"
    hangs.write_text("while True:\n    pass\n")
    with Runner(workers=1) as pool:
        assert pool.run(PROGRAMS / "checks_torch.py").error is None  # worker up and warm
        pool.submit([PROGRAMS / "seed002_retain.py"])  # queued behind the hang: resubmitted
        assert pool.run(hangs, timeout=1).error[0] == "TimeoutError"
        assert pool.run(PROGRAMS / "seed002_retain.py").error is None


def test_compare_states() -> None:
    assert compare_states({"g": None}, {"g": None}) is None
    assert compare_states({"g": [1.0]}, {"g": None}) == "g: expected 1 numbers, got None"
    assert compare_states({"w": [1.0, 2.0]}, {"w": [1.0, 2.0 + 1e-9]}) is None
    assert compare_states({"w": [1.0, 2.0]}, {"w": [1.0, 2.1]}) == "w: element 1 of 2: expected 2.0, got 2.1"
    assert compare_states({"w": [1.0]}, {"v": [1.0]}) == "keys differ: missing ['w'], unexpected ['v']"


def test_retain_graph_keeps_saved_tensors_alive(runner: Runner) -> None:
    kept, freed = runner.run(PROGRAMS / "retained_graph.py"), runner.run(PROGRAMS / "freed_graph.py")
    assert kept.retained_nodes == freed.retained_nodes  # same graph shape ...
    assert kept.retained_saved > 0 and freed.retained_saved == 0  # ... but only one holds its buffers
    assert compare_states(kept.state, freed.state) is None


def test_a_saved_tensor_modified_in_place_is_reported(runner: Runner) -> None:
    """torch skips its version check when saved tensor hooks are installed; the harness makes it."""
    result = runner.run(PROGRAMS / "step_before_second_backward.py")
    assert is_autograd_error(result.error), describe(result)
    assert "modified by an inplace operation" in result.error[1]
    assert 'step_before_second_backward.py", line 8' in result.where


def test_backward_work_counts_saved_tensors_read(runner: Runner) -> None:
    into, stops = runner.run(PROGRAMS / "backward_into_producer.py"), runner.run(PROGRAMS / "backward_stops_at_detach.py")
    assert into.error is None and stops.error is None
    assert compare_states(into.state, stops.state) is None  # same numbers: only the work tells them apart
    assert into.unpacked > stops.unpacked > 0


def test_each_program_imports_its_own_helper_module(tmp_path: Path) -> None:
    """Two programs in two folders, each with its own ``helpers.py``: the second must not get the
    first one's module from ``sys.modules`` (one worker runs many programs)."""
    for value in (1, 2):
        folder = tmp_path / f"p{value}"
        folder.mkdir()
        (folder / "helpers.py").write_text(f"VALUE = {value}\n")
        (folder / "main.py").write_text("from helpers import VALUE\n\nseen = VALUE\n")
    assert [run_program(tmp_path / f"p{v}" / "main.py").state["seen"] for v in (1, 2)] == [[1.0], [2.0]]
