"""``graphfix run --diff / --fix``: the run's evidence handed to the rules, the fix verified by a
re-run and rolled back when the re-run fails; every bug fixture of GF101-GF106 that raises, and
every one the watching detectors find, is fixed with the expert's numbers, and so is every seed
program."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="graphfix run executes the programs, which need torch")

from tests.execution import _init_worker
from tests.fixture_cases import discover
from tests.runtime_fixing import CARRIED_ITERATION, Fixed, fix_program

ROOT = Path(__file__).resolve().parent.parent
RULES = (
    "graph_carried_across_iterations", "subgraph_built_before_loop", "fake_not_detached_for_discriminator",
    "graph_cached_on_module", "separate_backward_through_shared_graph", "repeated_backward",
)
# Found without an error, by the detectors that watch the whole run (leaks, retained graphs, the
# optimizer protocol, penalties): fixed from the same evidence.
WATCHED = (
    "loss_accumulated_with_graph", "needless_retain_graph", "zero_grad_between_backward_and_step",
    "step_before_backward", "missing_zero_grad", "grad_without_create_graph",
)
_NOT_SEEN = "not diagnosed at run time (tests/test_runtime_fixtures.py WATCHED_GAPS)"
# Bug fixtures the run cannot fix yet (a case listed here must not be fixed): every bug fixture the
# run diagnoses, raising or silent, is repaired; these are the ones it does not diagnose.
KNOWN_GAPS: dict[str, str] = {
    "graph_carried_across_iterations/state_object_updated_by_method": (
        "the run's evidence names the local `h` of the inner loop as the holder, not the field the holder's method "
        "stores; its candidates cut the window's own recurrence, which the gradient probe refuses"
    ),
    "graph_carried_across_iterations/hidden_through_step_with_branch_backwards": (
        "diagnosed as GF105 at run time (the two branches' losses taken for two losses through one graph), whose "
        "candidates do not cut the carried state"
    ),
    **{f"grad_without_create_graph/{name}": _NOT_SEEN for name in (
        "maml_inner_loop", "maml_learner_map_lambda", "maml_several_inner_steps",
        "pinn_method_net_f", "pinn_ode_physics_loss",
    )},
    "loss_accumulated_with_graph/trainer_metric_lists": _NOT_SEEN,
    "fake_not_detached_for_discriminator/retain_graph_band_aid": _NOT_SEEN.replace("WATCHED_GAPS", "SILENT_GAPS"),
}
CASES = [c for c in discover() if c.rule_module in RULES + WATCHED and c.before]
SEEDS = sorted((ROOT / "examples").glob("seed*.py"))


@pytest.fixture(scope="module")
def fixed() -> Iterator[dict]:
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(min(2, os.cpu_count() or 1), initializer=_init_worker) as pool:
        jobs = {str(c.before): pool.apply_async(fix_program, (str(c.before), str(c.oracle or c.after))) for c in CASES}
        jobs.update({str(s): pool.apply_async(fix_program, (str(s),)) for s in SEEDS})
        yield {path: job.get(300) for path, job in jobs.items()}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_bug_fixture_is_fixed_with_the_experts_numbers(fixed: dict, case) -> None:
    result: Fixed = fixed[str(case.before)]
    if case.id in KNOWN_GAPS:
        assert not result.kept, "a known gap is fixed now: remove it from KNOWN_GAPS"
        pytest.xfail(f"{KNOWN_GAPS[case.id]}: {result.what}")
    assert result.kept, result.what
    assert result.difference is None, f"fixed, but not with the expert's numbers: {result.difference}\n{result.fixed_text}"


@pytest.mark.parametrize("seed", SEEDS, ids=[s.stem for s in SEEDS])
def test_seed_program_is_diagnosed_and_fixed(fixed: dict, seed: Path) -> None:
    result: Fixed = fixed[str(seed)]
    assert result.codes and result.kept, result.what
    assert "verified by a re-run: no error" in result.what


def graphfix_run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "fixer", "run", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


# `ops["step"]` is a call static analysis cannot see into: the text alone proves nothing
OPAQUE_CARRIED = """\
    import torch

    torch.manual_seed(0)
    cell = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(cell.parameters(), lr=0.1)
    ops = {"step": lambda x, h: torch.tanh(cell(x) + h)}
    h = torch.zeros(4)
    for i in range(3):
""" + textwrap.indent(CARRIED_ITERATION, " " * 8) + """\
        print("step", i){tail}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_static_graphfix_is_silent_where_the_run_proves_the_bug(tmp_path: Path) -> None:
    path = write(tmp_path, OPAQUE_CARRIED.replace("{tail}", ""))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    static = subprocess.run([sys.executable, "-m", "fixer", str(path)], env=env, capture_output=True, text=True)
    assert static.returncode == 0, static.stdout


def test_fix_from_evidence_is_applied_and_verified(tmp_path: Path) -> None:
    path = write(tmp_path, OPAQUE_CARRIED.replace("{tail}", ""))
    result = graphfix_run("--fix", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "train.py:10:5: GF101" in result.stdout
    assert "    h = h.detach()\n    h = ops[\"step\"](x, h)" in path.read_text()
    assert ("verified by a re-run: no error, 3 optimizer step(s) and 3 iteration(s); "
            "the first run failed after 1 optimizer step(s) and 2 iteration(s)") in result.stderr
    again = graphfix_run(str(path), cwd=tmp_path)  # the fixed program runs clean under the sanitizer
    assert again.returncode == 0 and again.stdout.split() == ["step", "0", "step", "1", "step", "2"], again.stderr


def test_diff_prints_the_fix_and_leaves_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, OPAQUE_CARRIED.replace("{tail}", ""))
    before = path.read_bytes()
    result = graphfix_run("--diff", str(path), cwd=tmp_path)
    assert result.returncode == 1
    assert "+    h = h.detach()" in result.stdout and path.read_bytes() == before


def test_a_fix_the_re_run_does_not_prove_is_rolled_back(tmp_path: Path) -> None:
    # the fix is right, but the program fails later for another reason: the run cannot prove it
    path = write(tmp_path, OPAQUE_CARRIED.replace("{tail}", '\n        if i == 1:\n            raise ValueError("bad batch")'))
    before = path.read_bytes()
    result = graphfix_run("--fix", str(path), cwd=tmp_path)
    assert result.returncode == 1
    assert path.read_bytes() == before
    assert "the fix is not kept, the files are as they were: the re-run ended with exit code 1" in result.stderr
    assert "ValueError: bad batch" in result.stderr  # the re-run's own output says why


# features an encoder gives the inputs once, before the loop: {trained} the parameters the
# optimizer steps, {inputs} what the encoder reads
FEATURES_ONCE = """\
    import torch

    torch.manual_seed(0)
    enc = torch.nn.Linear(4, 4)
    head = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD({trained}, lr=0.1)
    ops = {{"encode": lambda x: torch.tanh(enc(x))}}
    feats = ops["encode"]({inputs})
    for i in range(3):
        loss = head(feats).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_value_built_before_the_loop_is_recomputed_where_it_is_used(tmp_path: Path) -> None:
    # the encoder is trained: building the features under no_grad would leave it without a gradient
    path = write(tmp_path, FEATURES_ONCE.format(trained="[*enc.parameters(), *head.parameters()]", inputs="torch.ones(8, 4)"))
    result = graphfix_run("--fix", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "train.py:8: GF102: tried build `feats` under torch.no_grad() (line 8): refused: 2 parameter(s) trained" in result.stderr
    assert "train.py:8: GF102: tried recompute `feats` before line 10 (repeat line 8): proven by the re-run" in result.stderr
    assert '    feats = ops["encode"](torch.ones(8, 4))\n    loss = head(feats).pow(2).mean()' in path.read_text()


def test_a_value_built_before_the_loop_from_random_draws_is_built_under_no_grad(tmp_path: Path) -> None:
    # repeating the line would draw new data at every step; the encoder is no optimizer's
    path = write(tmp_path, FEATURES_ONCE.format(trained="head.parameters()", inputs="torch.randn(8, 4)"))
    result = graphfix_run("--fix", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "train.py:8: GF102: tried build `feats` under torch.no_grad() (line 8): proven by the re-run" in result.stderr
    assert "recompute" not in result.stderr
    assert 'with torch.no_grad():\n    feats = ops["encode"](torch.randn(8, 4))\nfor i in range(3):' in path.read_text()


def test_no_repair_applies_it_says_what_to_change_and_where(tmp_path: Path) -> None:
    # the gradient is read between the two backward calls: summing the losses would change what it prints
    path = write(tmp_path, """\
        import torch

        net = torch.nn.Linear(3, 3)
        ops = {"encode": lambda x: torch.tanh(net(x))}
        h = ops["encode"](torch.randn(4, 3))
        first = h.pow(2).sum()
        second = h.exp().sum()
        first.backward()
        print("norm", net.weight.grad.norm().item())
        second.backward()
    """)
    before = path.read_bytes()
    result = graphfix_run("--fix", str(path), cwd=tmp_path)
    assert result.returncode == 1 and path.read_bytes() == before
    assert "train.py:8: GF105: no rule can write this edit; change it by hand: backpropagate their sum once" in result.stderr
    assert "first backward at line 8: first.backward()" in result.stderr


def test_fix_with_max_steps_reruns_to_that_many_steps(tmp_path: Path) -> None:
    path = write(tmp_path, OPAQUE_CARRIED.replace("{tail}", "").replace("range(3)", "range(1000)"))
    result = graphfix_run("--fix", "--max-steps", "5", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "verified by a re-run: no error, 5 optimizer step(s) and 5 iteration(s) (stopped by --max-steps)" in result.stderr


def test_diff_and_fix_exclude_each_other(tmp_path: Path) -> None:
    path = write(tmp_path, OPAQUE_CARRIED.replace("{tail}", ""))
    assert graphfix_run("--diff", "--fix", str(path), cwd=tmp_path).returncode == 123


@pytest.mark.parametrize(
    "text, code, says",
    [
        ("import torch\nraise ValueError('no data here')\n", 1, "ValueError: no data here"),
        ("import sys, torch\nsys.exit(3)\n", 3, ""),
    ],
    ids=["unrelated-error", "sys-exit"],
)
def test_fix_on_a_program_without_a_graph_bug_changes_nothing(tmp_path: Path, text: str, code: int, says: str) -> None:
    path = write(tmp_path, text)
    result = graphfix_run("--fix", str(path), cwd=tmp_path)
    assert (result.returncode, path.read_text()) == (code, text)
    assert says in result.stderr and "fixer" not in result.stderr  # the program's own traceback only


def test_fix_of_a_script_with_dataloader_workers(tmp_path: Path) -> None:
    path = write(tmp_path, """\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        if __name__ == "__main__":
            loader = DataLoader(TensorDataset(torch.randn(16, 3)), batch_size=4, num_workers=2)
            weight = torch.ones(3, requires_grad=True)
            scale = (weight * 2).exp()
            for (x,) in loader:
                loss = (x * scale).sum()
                loss.backward()
    """)
    result = graphfix_run("--fix", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "train.py:7:5: GF102" in result.stdout and "verified by a re-run: no error, 0 optimizer step(s) and 4 iteration(s)" in result.stderr
    assert "        scale = (weight * 2).exp()\n        loss = (x * scale).sum()" in path.read_text()
