"""The detectors that watch a whole ``graphfix run`` (leaks, retained graphs, the optimizer
protocol, penalties) on small programs the fixtures do not cover: longer runs, bounded holders,
early stops, clipping, and a detector's own crash."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="graphfix run executes programs, which need torch")

from tests.sanitized import sanitize  # noqa: E402 (needs torch)

HEAD = """\
import collections
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 3), torch.randn(8, 1)
"""


def run(tmp_path: Path, body: str, **options) -> tuple:
    path = tmp_path / "train.py"
    path.write_text(HEAD + textwrap.dedent(body), encoding="utf-8")
    result = sanitize(str(path), **options)
    assert not result.failures, result.failures
    return result


def line_of(tmp_path: Path, text: str) -> int:
    lines = (tmp_path / "train.py").read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def only_finding(result) -> tuple:
    """(code, line, {role: line}) of the run's one finding."""
    ((code, line, evidence),) = result.findings
    return code, line, dict(evidence)


def storing_each_loss(holder: str, store: str) -> str:
    """A canonical 12-step loop that keeps each step's loss, graph and all, in ``holder``."""
    loop = "for step in range(12):\n" + "".join(f"    {line}\n" for line in (
        "optimizer.zero_grad()", "loss = nn.functional.mse_loss(model(x), y)", "loss.backward()", "optimizer.step()", store,
    ))  # fmt: skip
    return f"{holder}\n{loop}"


def test_growing_list_of_losses_is_a_leak_named_where_it_is_filled(tmp_path: Path) -> None:
    result = run(tmp_path, storing_each_loss("history = []", "history.append(loss)"))
    code, line, evidence = only_finding(result)
    assert (code, line, evidence["oldest graph built"]) == ("GF301", line_of(tmp_path, "history.append(loss)"), line_of(tmp_path, "loss = nn.functional"))


def test_bounded_window_of_graphs_is_not_a_leak(tmp_path: Path) -> None:
    result = run(tmp_path, storing_each_loss("recent = collections.deque(maxlen=2)", "recent.append(loss)"))
    assert result.findings == ()


def three_steps(holder: str, store: str) -> str:
    return storing_each_loss(holder, store).replace("range(12)", "range(3)")


def test_a_short_run_that_keeps_each_loss_after_its_step_is_found_at_its_end(tmp_path: Path) -> None:
    """The third step's graph joins the list only after the last backward: the program's end shows it."""
    result = run(tmp_path, three_steps("history = []", "history.append(loss)"))
    code, line, _ = only_finding(result)
    assert (code, line) == ("GF301", line_of(tmp_path, "history.append(loss)"))


def test_a_short_run_that_keeps_the_last_two_losses_is_silent_at_its_end(tmp_path: Path) -> None:
    result = run(tmp_path, three_steps("recent = collections.deque(maxlen=2)", "recent.append(loss)"))
    assert result.findings == ()


def test_a_value_held_by_two_names_counts_for_each(tmp_path: Path) -> None:
    """``last`` and ``history[-1]`` are one tensor: the list still holds all three steps."""
    result = run(tmp_path, three_steps("history = []", "history.append(loss); last = loss"))
    assert [(code, line) for code, line, _ in result.findings] == [("GF301", line_of(tmp_path, "history.append(loss)"))]


def test_a_long_list_filled_many_times_per_step_is_still_seen_growing(tmp_path: Path) -> None:
    """The sampler looks at a bounded, evenly spaced part of a long list: entries of every age."""
    body = """\
    history = []
    for step in range(12):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        history.extend(loss * k for k in range(50))  # built in the loss's own step
        loss.backward()
        optimizer.step()
    """
    result = run(tmp_path, body)
    code, line, _ = only_finding(result)
    assert (code, line) == ("GF301", line_of(tmp_path, "history.extend"))


@pytest.mark.parametrize("holder", ["argparse.Namespace()", "Meter()"])
def test_a_leak_on_an_attribute_is_found_on_library_and_user_objects(tmp_path: Path, holder: str) -> None:
    """A library object's public attributes and a user object's private ones are both walked."""
    head = "import argparse\n\nclass Meter:\n    def __init__(self):\n        self._values = []\n\n"
    store = "meter.values.append(loss)" if "argparse" in holder else "meter._values.append(loss)"
    setup = f"meter = {holder}\n" + ("meter.values = []\n" if "argparse" in holder else "")
    result = run(tmp_path, head + storing_each_loss(setup, store))
    code, line, _ = only_finding(result)
    assert (code, line) == ("GF301", line_of(tmp_path, store))


def test_never_zeroed_gradients_are_found_through_clipping(tmp_path: Path) -> None:
    result = run(tmp_path, """\
        for step in range(6):
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
    """)
    assert [(c, n) for c, n, _ in result.findings] == [("GF203", line_of(tmp_path, "optimizer.step()"))]


def test_gradients_reset_by_hand_are_not_accumulation(tmp_path: Path) -> None:
    result = run(tmp_path, """\
        for step in range(6):
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            for p in model.parameters():
                p.grad.zero_()
    """)
    assert result.findings == ()


def test_retained_graph_still_alive_at_an_early_stop_is_undecided(tmp_path: Path) -> None:
    body = """\
        for step in range(6):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward(retain_graph=True)
            optimizer.step()
    """
    assert run(tmp_path, body, max_steps=1).findings == ()
    assert [(c, n) for c, n, _ in run(tmp_path, body).findings] == [("GF302", line_of(tmp_path, "retain_graph=True"))]


def test_penalty_on_constant_gradients_reports_the_grad_call(tmp_path: Path) -> None:
    result = run(tmp_path, """\
        x.requires_grad_(True)
        for step in range(3):
            optimizer.zero_grad()
            out = model(x)
            g = torch.autograd.grad(out.sum(), x, retain_graph=True)[0]
            loss = nn.functional.mse_loss(out, y) + 0.1 * g.pow(2).sum()
            loss.backward()
            optimizer.step()
    """)
    code, line, evidence = only_finding(result)
    assert (code, line, evidence["added to the loss"]) == ("GF107", line_of(tmp_path, "torch.autograd.grad"), line_of(tmp_path, "loss = nn.functional"))


def test_penalty_on_an_input_gradient_read_after_backward_reports_that_backward(tmp_path: Path) -> None:
    result = run(tmp_path, """\
        for step in range(3):
            inputs = x.clone().requires_grad_(True)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(inputs), y)
            loss.backward(retain_graph=True)
            penalty = inputs.grad.pow(2).sum()
            (loss + 0.1 * penalty).backward()
            optimizer.step()
    """)
    assert [(code, line) for code, line, _ in result.findings] == [("GF107", line_of(tmp_path, "loss.backward(retain_graph=True)"))]


def test_an_input_gradient_read_under_no_grad_is_not_followed() -> None:
    """A read for the input's own update (an attack step, a feature visualisation) cannot join a
    loss: torch calls stay unwatched; the same read in grad mode is followed."""
    from fixer.runtime.session import Session

    inputs = torch.randn(4, 3, requires_grad=True)
    with Session() as session:
        (inputs * 2).sum().backward()
        with torch.no_grad():
            inputs -= 0.1 * inputs.grad
        watched_after_no_grad = list(session.recorder.op_watchers)
        inputs.grad.norm()
        watched_after_grad_mode = [type(o).__name__ for o in session.recorder.op_watchers]
    assert (watched_after_no_grad, watched_after_grad_mode) == ([], ["Penalty"])


def test_a_graph_built_before_the_loop_kept_by_retain_graph_and_reused_after_steps_is_gf102(tmp_path: Path) -> None:
    """Nothing raises (tanh and a data-fed layer save no parameter): every step gets the old
    parameters' gradients. The run names the line that built it."""
    result = run(tmp_path, """\
        features = torch.tanh(model(x))
        for step in range(4):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(features, y)
            loss.backward(retain_graph=True)
            optimizer.step()
    """)
    code, line, evidence = only_finding(result)
    assert (code, line, evidence["parameters stepped"]) == ("GF102", line_of(tmp_path, "features = torch.tanh"), line_of(tmp_path, "optimizer.step()"))


def test_a_stale_graph_kept_on_an_object_is_named_where_it_is_filled(tmp_path: Path) -> None:
    """The same bug moved into a class: the field set in ``__init__`` through a helper."""
    result = run(tmp_path, """\
        def features_of(inputs):
            return torch.tanh(model(inputs))

        class Trainer:
            def __init__(self):
                self.cache = features_of(x)

            def step(self):
                optimizer.zero_grad()
                loss = nn.functional.mse_loss(self.cache, y)
                loss.backward(retain_graph=True)
                optimizer.step()

        trainer = Trainer()
        for step in range(3):
            trainer.step()
    """)
    code, line, evidence = only_finding(result)
    assert (code, line, evidence["built"]) == ("GF102", line_of(tmp_path, "self.cache = features_of"), line_of(tmp_path, "trainer = Trainer()"))


def test_a_graph_of_frozen_parameters_reused_by_every_step_is_not_stale(tmp_path: Path) -> None:
    result = run(tmp_path, """\
        scale = torch.ones(1, requires_grad=True)
        scale_optimizer = torch.optim.SGD([scale], lr=0.01)
        features = torch.tanh(model(x))
        for step in range(4):
            scale_optimizer.zero_grad()
            loss = nn.functional.mse_loss(features * scale, y)
            loss.backward(retain_graph=True)
            scale_optimizer.step()
    """)
    assert result.findings == ()


def test_a_detectors_crash_is_reported_and_the_program_runs_on(tmp_path: Path, monkeypatch) -> None:
    from fixer.runtime.protocol import Protocol

    def broken(self, *args):
        raise ValueError("detector bug")

    monkeypatch.setattr(Protocol, "before_step", broken)
    path = tmp_path / "train.py"
    path.write_text(HEAD + "for _ in range(3):\n    nn.functional.mse_loss(model(x), y).backward()\n    optimizer.step()\nprint('done')\n", encoding="utf-8")
    result = sanitize(str(path))
    assert result.exit_code == 0 and "done" in result.output
    assert result.failures == ("Protocol.before_step: ValueError: detector bug",)


def test_code_without_a_source_file_is_pointed_at_through_its_caller_without_a_crash() -> None:
    import graphfix

    program = HEAD + "for _ in range(5):\n    nn.functional.mse_loss(model(x), y).backward()\n    optimizer.step()\n"
    with graphfix.watch() as session:
        exec(compile(program, "<cell>", "exec"), {})  # a notebook cell's code: no line to point at
    assert session.failures == []
    assert [(f.code, f.filename) for f in session.findings] == [("GF203", __file__)]  # the exec line, the user's nearest
