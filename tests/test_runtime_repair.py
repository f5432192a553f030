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

from fixer.apply import apply_edits
from fixer.context import FileContext
from fixer.edits.statements import wrap_in
from fixer.runtime.fill_site import handed_fill
from fixer.runtime.flows import Flows
from fixer.runtime.launcher import Outcome
from fixer.runtime.repair.cuts import MARK, cut_verdict
from fixer.runtime.repair.effects import side_effect
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
    "score_reused_after_critic_step": ("GF103", "recompute `fake_score` before line"),  # blind3 007's shape
    "labels_from_a_fixed_network": ("GF102", "build `labels` under torch.no_grad()"),  # blind3 002's shape
    "validation_sum_kept": ("GF301", "store a number at line"),
    "baseline_filled_once": ("GF102", "store detached at line 30"),  # blind4 003's shape
    "features_filled_once": ("GF102", "recompute `batch.feats` before line"),  # its look-alike: the cut is refused
    "state_fields_set_by_a_helper": ("GF101", "detach `self.carry.hidden`, `self.carry.cell` after line 26 binds them"),  # blind4 002's shape
    "outputs_handed_to_hooks": ("GF301", "hand `outputs` on as numbers at line 31"),  # blind4 007's shape: the store is in hooks/
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


def test_a_cut_that_takes_the_adversarial_gradient_away_is_refused(fixed: dict) -> None:
    """The union of trained parameters would pass it (the generator keeps its pixel gradient);
    the probe shows the generator's backward sending a stepped gradient through the score."""
    what = fixed["score_reused_after_critic_step"].what
    assert "tried detach `fake_score` where line 31 hands it on: refused: it cuts the gradient that the backward at " in what, what
    assert "score_reused_after_critic_step.py:32 sends through the cut value to 4 parameter(s) an optimizer steps with it" in what


def test_a_value_built_before_the_loop_is_cut_unless_its_gradient_is_the_only_one(fixed: dict) -> None:
    """The baselines' value network has its own loss: the cut is kept, not the recompute (which
    would train it through the policy's loss at every epoch); the features' encoder has none."""
    assert "recompute" not in fixed["baseline_filled_once"].what
    assert "tried store detached at line 27: refused: 2 parameter(s) trained by the first run get no gradient now" in fixed["features_filled_once"].what


def test_labels_with_noise_are_never_recomputed(fixed: dict) -> None:
    assert "recompute" not in fixed["labels_from_a_fixed_network"].what


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


def test_a_gradient_that_vanishes_late_in_both_runs_is_no_loss() -> None:
    """A saturated parameter (a clamp at its bound) gets no gradient at the last steps of either run:
    the re-run did not cut it off. One graded lately by the first run and never by the re-run was."""
    both = ("parameter 1 (4,)", "parameter 2 (1, 4)")
    first = Outcome([], 0, 3, iterations=3, graded=frozenset(both), graded_lately=frozenset(both[:1]), direct=frozenset(both))
    assert judge(first, _summary(graded=both, graded_lately=both[:1]), FINDING) is None
    assert judge(first, _summary(graded=both[:1], graded_lately=both[:1]), FINDING) == (
        "1 parameter(s) trained by the first run get no gradient now (parameter 2 (1, 4))"
    )


def test_a_run_failing_before_its_first_step_is_judged_by_what_its_backward_reached() -> None:
    """The first backward reached the encoder's and the head's parameters, then the program failed
    before any step: a repair under which the encoder never gets a gradient cut it off."""
    both = ("parameter 1 (4,)", "parameter 2 (1, 4)")
    first = Outcome([], 1, 0, iterations=1, direct=frozenset(both))
    assert judge(first, _summary(direct=both), FINDING) is None
    assert judge(first, _summary(direct=both[1:]), FINDING) == "1 parameter(s) trained by the first run get no gradient now (parameter 1 (4,))"


def test_builders_sum_two_backwards_with_the_second_loss_built_between(tmp_path: Path) -> None:
    text = "def step(self, h, y):\n    aux = self.aux(h)\n    aux.backward()\n    main = self.loss(h, y)\n    main.mean().backward()\n"
    pieces = (Piece("first backward", "", 3, 1, ""),)
    found = [t for t in _titles(tmp_path, text, Finding("GF105", "", "", 3, 0, "e", pieces)) if t[0].startswith("backpropagate")]
    assert found == [("backpropagate `aux` and `main.mean()` once, summed (lines 3-5)",
                      "def step(self, h, y):\n    aux = self.aux(h)\n    main = self.loss(h, y)\n    (main.mean() + aux).backward()\n")]
    stepped = text.replace("    main = self.loss(h, y)\n", "    self.opt.step()\n    main = self.loss(h, y)\n")
    assert not [t for t in _titles(tmp_path, stepped, Finding("GF105", "", "", 3, 0, "e", pieces)) if t[0].startswith("backpropagate")]


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


def test_a_flag_passed_on_is_turned_on_where_a_caller_leaves_it_off(tmp_path: Path) -> None:
    text = (
        "def grads(net, x, smooth=False):\n"
        "    return torch.autograd.grad(net(x).sum(), x, create_graph=smooth)\n"
        "def penalty(net, x, smooth=False):\n"
        "    return grads(net, x, smooth=smooth)[0].pow(2).sum()\n"
        "loss = penalty(net, x)\n"
        "kept = penalty(net, x, False)\n"
        "asked = penalty(net, x, smooth=flag)\n"
    )
    chain = [Piece("gradient taken", "", 2, 1, ""), Piece("called from", "", 4, 1, "")]
    found = _titles(tmp_path, text, Finding("GF107", "", "", 2, 0, "", (*chain, Piece("called from", "", 5, 1, ""))))
    assert found == [("pass smooth=True at line 5 (the flag the create_graph of line 2 is given)", text.replace("penalty(net, x)\n", "penalty(net, x, smooth=True)\n"))]
    found = _titles(tmp_path, text, Finding("GF107", "", "", 2, 0, "", (*chain, Piece("called from", "", 6, 1, ""))))
    assert [fixed for _, fixed in found] == [text.replace("penalty(net, x, False)", "penalty(net, x, True)")]
    assert _titles(tmp_path, text, Finding("GF107", "", "", 2, 0, "", (*chain, Piece("called from", "", 7, 1, "")))) == []  # the caller's own choice


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


def test_builders_put_a_value_built_outside_every_loop_under_no_grad_first(tmp_path: Path) -> None:
    text = "import torch\nY = net(X) + torch.randn(4)\nfor x in X:\n    y = Y[0]\n    (x - y).sum().backward()\n"
    pieces = (Piece("built", "", 2, 1, ""), Piece("stored in Y", "", 2, None, ""), Piece("used again", "", 4, 2, ""), Piece("failed", "", 5, 2, ""))
    found = _titles(tmp_path, text, Finding("GF102", "", "", 2, 0, "e", pieces))
    assert found[0][0] == "build `Y` under torch.no_grad() (line 2)"
    assert "with torch.no_grad():\n    Y = net(X) + torch.randn(4)\nfor x in X:" in found[0][1]
    assert not any(t.startswith("recompute") for t, _ in found), found  # it draws random numbers


def test_the_probe_of_a_cut_marks_the_value_and_changes_nothing_else(tmp_path: Path) -> None:
    text = "def fit(self, xs):\n    for x in xs:\n        total = self.loss(x) + self.reg\n        total.backward()\n\n\ndef compile(self):\n    self.reg = self.penalty()\n"
    path = tmp_path / "train.py"
    path.write_text(text, encoding="utf-8")
    finding = Finding("GF104", "", str(path), 8, 0, "e", (Piece("stored in self.reg", str(path), 8, None, ""), Piece("used again", str(path), 3, 2, "")))
    detach = next(c for c in candidates(finding) if c.title == "store detached at line 8")
    assert detach.probe[0].fixed == text.replace("self.penalty()", f"{MARK}(self.penalty())")


@pytest.mark.parametrize(
    "statement, why",
    [
        ("y = net(x) + 0.1 * torch.randn(3)", "draws random numbers (`torch.randn`)"),
        ("y = F.dropout(net(x), 0.5)", "draws random numbers (`F.dropout`)"),
        ("y = block(x)", "draws random numbers (`nn.Dropout`)"),
        ("y = norm(x)", "updates running statistics in place (`nn.BatchNorm1d`)"),
        ("y = next(batches)", "reads or writes outside the computation (`next`)"),
        ("y = bank.add_(x)", "changes a tensor in place (`bank.add_`)"),
        ("y = net(x).mean()", None),
    ],
)
def test_what_may_be_recomputed(statement: str, why) -> None:
    text = (
        "class Block(nn.Module):\n    def __init__(self):\n        self.drop = nn.Dropout(0.1)\n\n\n"
        f"block = Block()\nnorm = nn.BatchNorm1d(3)\nnet = nn.Linear(3, 3)\n{statement}\n"
    )
    ctx = FileContext("/tmp/train.py", text)
    assert side_effect(ctx, ctx.tree.body[-1]) == why


def test_a_step_uses_the_gradients_of_the_backwards_since_its_parameters_reset() -> None:
    flows = Flows()
    d, g = object(), object()
    flows.backward("d:85", [])  # the critic's loss reaches both players
    flows.step([(d, "D")])
    flows.reset([g])  # netG.zero_grad(): the critic's gradient on the generator is dropped
    flows.backward("g:91", [])
    flows.step([(g, "G")])
    assert flows.used == {"d:85": {"D"}, "g:91": {"G"}}


def test_a_cut_is_refused_only_where_a_stepped_gradient_went_through_it() -> None:
    probe = _summary(through=(("g:91", ("D", "G")),), used=(("d:85", ("D",)),))
    assert cut_verdict({}, probe, (("g:91", ("G",)),)) == (
        "it cuts the gradient that the backward at g:91 sends through the cut value to 1 parameter(s) an optimizer steps with it (G)"
    )
    assert cut_verdict({}, _summary(through=(("d:85", ("G",)),)), (("d:85", ("D",)), ("g:91", ("G",)))) is None


def test_wrap_in_moves_a_statement_under_a_with(tmp_path: Path) -> None:
    text = "if True:\n    y = f(\n        x)  # keep\n    z = 1\n"
    ctx = FileContext(str(tmp_path / "a.py"), text)
    stmt = ctx.tree.body[0].body[0]
    assert apply_edits(text, [wrap_in(ctx, stmt, "with torch.no_grad()")]) == "if True:\n    with torch.no_grad():\n        y = f(\n            x)  # keep\n    z = 1\n"


def test_builders_move_zero_grad_before_the_backward_then_after_the_step(tmp_path: Path) -> None:
    text = "for x in xs:\n    loss = f(x)\n    loss.backward()\n    opt.zero_grad()\n    opt.step()\n"
    pieces = (Piece("gradient from", "", 3, None, ""), Piece("wiped by", "", 4, 1, ""), Piece("stepped", "", 5, 1, ""))
    found = _titles(tmp_path, text, Finding("GF201", "", "", 4, 0, "", pieces))
    assert found == [
        ("move zero_grad() (line 4) before the backward at line 3", "for x in xs:\n    loss = f(x)\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n"),
        ("move zero_grad() (line 4) after the step at line 5", "for x in xs:\n    loss = f(x)\n    loss.backward()\n    opt.step()\n    opt.zero_grad()\n"),
    ]


def test_builders_reset_the_gradients_a_step_keeps_using(tmp_path: Path) -> None:
    text = "for x in xs:\n    f(x).backward()\n    self.opt.step()\n"
    found = _titles(tmp_path, text, Finding("GF203", "", "", 3, 0, "", (Piece("stepped", "", 3, 2, ""),)))
    assert found == [("reset the gradients after the step at line 3", "<same>    self.opt.zero_grad()\n")]


def test_builders_reset_the_gradients_in_the_method_the_loop_calls_to_step(tmp_path: Path) -> None:
    text = "class A:\n    def update(self, x):\n        self.net(x).sum().backward()\n        self.opt.step()\n\n    def fit(self, xs):\n        for x in xs:\n            self.update(x)\n"
    pieces = (Piece("accumulated by", "", 3, 1, ""), Piece("accumulated again", "", 3, 2, ""), Piece("stepped", "", 8, 2, ""))
    found = _titles(tmp_path, text, Finding("GF203", "", "", 8, 0, "", pieces))
    zero = "        self.opt.zero_grad()\n"
    assert found == [
        ("reset the gradients before the backward at line 3", text.replace("        self.net", zero + "        self.net")),
        ("reset the gradients after the step at line 4", text.replace("step()\n", "step()\n" + zero)),
    ]


def test_builders_delete_a_step_between_two_backwards_only_where_the_same_optimizer_steps_after(tmp_path: Path) -> None:
    text = "for x in xs:\n    out = net(x)\n    a(out).backward(retain_graph=True)\n    opt.step()\n    b(out).backward()\n    clip(net)\n    opt.step()\n"
    pieces = (Piece("first backward", "", 3, 1, ""), Piece("failed", "", 5, 1, ""), Piece("changed by", "", 4, 1, ""))
    found = _titles(tmp_path, text, Finding("GF105", "", "", 3, 0, "", pieces))
    assert found[0] == (
        "delete the premature step at line 4: the step at line 7 applies both backward calls' gradients",
        text.replace("    opt.step()\n    b(out)", "    b(out)"),
    )
    cleared_between_steps = text.replace("    clip(net)", "    opt.zero_grad()")
    cleared_before_backward = text.replace("    b(out)", "    opt.zero_grad()\n    b(out)")
    moved = (Piece("first backward", "", 3, 1, ""), Piece("failed", "", 6, 1, ""), Piece("changed by", "", 4, 1, ""))
    for n, (two_updates, evidence) in enumerate(((cleared_between_steps, pieces), (cleared_before_backward, moved))):
        (tmp_path / str(n)).mkdir()
        found = _titles(tmp_path / str(n), two_updates, Finding("GF105", "", "", 3, 0, "", evidence))
        assert not any(title.startswith("delete the premature step") for title, _ in found)


def test_a_cut_of_a_value_built_before_the_loop_spares_what_fresh_graphs_train() -> None:
    probe = _summary(through=(("t:9", ("V", "E")),), used=(("t:9", ("V", "E", "P")),), beside=(("t:9", ("V", "P")),))
    assert cut_verdict({}, probe, {}, reused=True) == (
        "it cuts the gradient that the backward at t:9 sends through the cut value to 1 parameter(s) an optimizer steps with it (E)"
    )
    assert "to 2 parameter(s)" in cut_verdict({}, probe, {})


HANDED = """\
class Model:
    def keep(self, pair):
        self.state.h, self.state.c = pair

    def count(self, n):
        self.stats.seen = n

    def step(self, x):
        out, pair = self.net(x)
        self.count(len(x))
        self.keep(pair)
"""


def test_the_fill_is_found_in_the_method_the_built_value_is_handed_to(tmp_path: Path) -> None:
    path = tmp_path / "model.py"
    path.write_text(HANDED, encoding="utf-8")
    code = next(c for c in compile(HANDED, str(path), "exec").co_consts if hasattr(c, "co_consts")).co_consts
    step = next(c for c in code if getattr(c, "co_name", "") == "step")
    assert handed_fill("self.state.c", step, 9) == (3, True)
    assert handed_fill("self.stats.seen", step, 9) is None  # count is handed no value the line built
    assert handed_fill("pair", step, 9) is None  # a plain name: the callee's own local


def test_a_detach_where_a_buffer_is_stored_needs_no_probe(tmp_path: Path) -> None:
    """A registered buffer is module state no optimizer trains (blind3 001: an amax history)."""
    text = (
        "class Layer(nn.Module):\n    def __init__(self):\n        self.register_buffer('hist', torch.zeros(4))\n\n"
        "    def update(self):\n        self.hist = torch.roll(self.hist, 1) + self.weight.abs().max()\n"
    )
    path = tmp_path / "train.py"
    path.write_text(text, encoding="utf-8")
    finding = Finding("GF104", "", str(path), 6, 0, "e", (Piece("stored in model.hist", str(path), 6, None, ""),))
    detach = next(c for c in candidates(finding) if c.title == "store detached at line 6")
    assert detach.probe is None
