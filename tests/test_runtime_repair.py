"""``graphfix run --fix`` repairs from the run's evidence (fixer.runtime.repair): one small
program per repair kind (tests/repair_programs/), each fixed with its expert's numbers by a
candidate the re-run proved; a detach that would freeze a trained encoder is refused, measured;
and the trial's judgement and the builders' text, alone."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="graphfix run executes the programs, which need torch")

from fixer.runtime.launcher import Outcome
from fixer.runtime.repair.candidate import context
from fixer.runtime.repair.expert import candidates
from fixer.runtime.repair.trial import judge
from fixer.runtime.report import Finding, Piece
from fixer.runtime.verify import Summary
from tests.execution import _init_worker
from tests.runtime_fixing import Fixed, fix_program

PROGRAMS = Path(__file__).resolve().parent / "repair_programs"
# program -> (the finding's code, words of the candidate that must be the one kept)
REPAIRED = {
    "bank_written_in_place": ("GF101", "detach `self.rows` where it crosses into the next iteration"),
    "state_dict_returned": ("GF101", "detach `state` after line"),
    "fake_through_history": ("GF103", "detach each item of `self.items` where line"),
    "meter_sums": ("GF301", "store a number at line"),
    "retained_in_method": ("GF302", "drop retain_graph at line"),
}
REFUSED = "encoder_cached_once"


@pytest.fixture(scope="module")
def fixed() -> Iterator[dict]:
    with multiprocessing.get_context("spawn").Pool(min(2, os.cpu_count() or 1), initializer=_init_worker) as pool:
        jobs = {name: pool.apply_async(fix_program, (str(PROGRAMS / f"{name}.py"), str(PROGRAMS / f"{name}.expert.py"))) for name in REPAIRED}
        jobs[REFUSED] = pool.apply_async(fix_program, (str(PROGRAMS / f"{REFUSED}.py"),))
        yield {name: job.get(600) for name, job in jobs.items()}


@pytest.mark.parametrize("name", sorted(REPAIRED))
def test_each_repair_kind_fixes_its_program_with_the_experts_numbers(fixed: dict, name: str) -> None:
    result: Fixed = fixed[name]
    code, title = REPAIRED[name]
    assert code in result.codes, result.what
    assert result.kept, result.what
    assert result.difference is None, f"{result.difference}\n{result.fixed_text}"
    kept = [line for line in result.what.split(" | ") if line.endswith("proven by the re-run")]
    assert kept and (title in kept[0] or "the static rule's fix" in kept[0]), result.what


def test_a_detach_that_freezes_a_trained_encoder_is_refused(fixed: dict) -> None:
    result: Fixed = fixed[REFUSED]
    assert result.codes == ("GF104",) and not result.kept, result.what
    assert "tried store detached at line" in result.what
    assert "parameter(s) trained by the first run get no gradient now" in result.what


def _first(graded=("parameter 1 (4,)", "parameter 2 (1, 4)"), steps=1, iterations=2) -> Outcome:
    return Outcome([], 1, steps, iterations=iterations, graded=frozenset(graded), direct=frozenset(graded))


def _summary(**changes) -> Summary:
    figures = dict(exit_code=0, findings=0, steps=3, iterations=3, stopped=True, graded_lately=("parameter 1 (4,)", "parameter 2 (1, 4)"))
    return Summary(**{**figures, **changes})


FINDING = Finding("GF101", "carried", "/tmp/train.py", 10, 4, "Trying to backward", ())


@pytest.mark.parametrize(
    "second, why",
    [
        (_summary(), None),
        (_summary(graded_lately=("parameter 1 (4,)",)), "1 parameter(s) trained by the first run get no gradient now (parameter 2 (1, 4))"),
        (_summary(nonfinite=True), "the re-run's gradients hold NaN or infinite values"),
        (_summary(steps=0, iterations=1), "the re-run reached 0 step(s) and 1 iteration(s), fewer than the first run"),
        (_summary(exit_code=1, stopped=False), "the re-run ended with exit code 1"),
        (_summary(exit_code=1, stopped=False, findings=1, found=({**vars(FINDING), "evidence": []},)), "the re-run still reports it"),
    ],
    ids=["proven", "cuts-a-parameter", "nan", "fewer-steps", "crash", "still-there"],
)
def test_the_trial_judges_a_re_run(second: Summary, why) -> None:
    assert judge(_first(), second, FINDING) == why


def test_a_new_finding_elsewhere_is_the_next_rounds_work() -> None:
    other = {**vars(FINDING), "line": 12, "evidence": []}
    assert judge(_first(), _summary(exit_code=1, stopped=False, findings=1, found=(other,)), FINDING) is None


def _titles(tmp_path: Path, text: str, finding: Finding) -> list[tuple[str, str]]:
    path = tmp_path / "train.py"
    path.write_text(text, encoding="utf-8")
    finding = Finding(finding.code, "", str(path), finding.line, 0, finding.error, tuple(Piece(p.role, str(path), p.line, 1, "") for p in finding.evidence))
    found = candidates(finding)
    original = context(str(path)).source
    return [(c.title, c.proposals[0].fixed.replace(original, "<same>")) for c in found]


def test_builders_rank_recompute_before_detach_at_a_store(tmp_path: Path) -> None:
    text = "def fit(self, xs):\n    for x in xs:\n        total = self.loss(x) + self.reg\n        total.backward()\n\n\ndef compile(self):\n    self.reg = self.penalty()\n"
    finding = Finding("GF104", "", "", 8, 0, "e", (Piece("stored in self.reg", "", 8, None, ""), Piece("used again", "", 3, 2, ""), Piece("failed", "", 4, 2, "")))
    found = _titles(tmp_path, text, finding)
    assert [t for t, _ in found] == ["recompute `self.reg` before line 3 (repeat line 8)", "store detached at line 8"]
    assert "        self.reg = self.penalty()\n        total = self.loss(x) + self.reg\n" in found[0][1]
    assert "    self.reg = self.penalty().detach()\n" in found[1][1]


def test_builders_detach_an_in_place_store_before_its_loop_first(tmp_path: Path) -> None:
    text = "def update(self, feats):\n    for c in range(3):\n        self.rows[c] = 0.5 * self.rows[c] + feats[c]\n"
    finding = Finding("GF101", "", "", 3, 0, "e", (Piece("stored in bank.rows", "", 3, None, ""),))
    found = _titles(tmp_path, text, finding)
    assert found[0][0] == "detach `self.rows` where it crosses into the next iteration (before line 2)"
    assert "    self.rows = self.rows.detach()\n    for c in range(3):\n" in found[0][1]
    assert found[1][0] == "store detached at line 3" and "= (0.5 * self.rows[c] + feats[c]).detach()" in found[1][1]


def test_builders_for_keywords(tmp_path: Path) -> None:
    retained = Finding("GF302", "", "", 1, 0, "", (Piece("retained by", "", 1, 1, ""),))
    assert _titles(tmp_path, "loss.backward(retain_graph=True)\n", retained) == [("drop retain_graph at line 1", "loss.backward()\n")]
    penalty = Finding("GF107", "", "", 1, 0, "", (Piece("gradient taken", "", 1, 1, ""),))
    text = "(g,) = torch.autograd.grad(out.sum(), x, retain_graph=True)\n"
    assert _titles(tmp_path, text, penalty) == [("create_graph=True at line 1", "(g,) = torch.autograd.grad(out.sum(), x, create_graph=True)\n")]


def test_diff_shows_the_proven_repair_and_leaves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    shutil.copyfile(PROGRAMS / "retained_in_method.py", path)
    before = path.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(PROGRAMS.parent.parent)}
    result = subprocess.run([sys.executable, "-m", "fixer", "run", "--diff", "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 1 and path.read_bytes() == before, result.stderr
    assert "-        self.loss.backward(retain_graph=True)\n+        self.loss.backward()\n" in result.stdout
    assert "graphfix run: would fix train.py (GF302): verified by a re-run" in result.stderr


def test_a_parameter_no_optimizer_steps_still_counts_where_its_backward_reaches_it() -> None:
    orphan = frozenset({"parameter 1 (1,)"})  # ``torch.exp(nn.Parameter(...))``: reached, held by no module
    first = Outcome([], 1, 1, iterations=2, direct=orphan, orphans=orphan)
    assert judge(first, _summary(graded_lately=()), FINDING) == "1 parameter(s) trained by the first run get no gradient now (parameter 1 (1,))"
    assert judge(first, _summary(graded_lately=(), direct=("parameter 1 (1,)",)), FINDING) is None
