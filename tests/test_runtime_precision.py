"""Precision and cost of the watch itself (issue 23, item 4): a leak is something that grows with
the steps, never one value spanning several optimizers' steps; the recorder keeps freed graphs
for a bounded time; a needless retain_graph is decided under --max-steps from the graphs that
died unwalked; a report never starts on the program's unfinished ``\\r`` progress line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="graphfix run executes programs, which need torch")

from tests.sanitized import sanitize  # noqa: E402 (needs torch)

CORRECT = Path(__file__).resolve().parent / "correct_programs"


@pytest.mark.parametrize("program", sorted(p.name for p in CORRECT.glob("*.py")))
def test_correct_real_shaped_program_runs_silent(program: str) -> None:
    """CycleGAN's three optimizers with ``loss_D`` kept for the log, a GAN logging ``d_loss +
    g_loss``, a ``deque(maxlen=10)`` of losses, an actor-critic loop of tiny steps."""
    result = sanitize(str(CORRECT / program))
    assert (result.exit_code, result.findings, result.failures) == (0, (), ())


THREE_OPTIMIZERS = """\
import torch
from torch import nn

torch.manual_seed(0)
G, D_A, D_B = nn.Linear(4, 4), nn.Linear(4, 1), nn.Linear(4, 1)
opt_G, opt_A, opt_B = (torch.optim.SGD(m.parameters(), lr=0.01) for m in (G, D_A, D_B))
{head}
for i in range(20):
    x = torch.randn(8, 4)
    opt_G.zero_grad()
    loss_G = D_A(G(x)).mean() + D_B(G(x)).mean()
    loss_G.backward()
    opt_G.step()
    opt_A.zero_grad()
    loss_D_A = D_A(x).pow(2).mean()
    loss_D_A.backward()
    opt_A.step()
    opt_B.zero_grad()
    loss_D_B = D_B(x).pow(2).mean()
    loss_D_B.backward()
    opt_B.step()
    {store}
"""


def run_three(tmp_path: Path, head: str, store: str):
    path = tmp_path / "train.py"
    path.write_text(THREE_OPTIMIZERS.format(head=head, store=store), encoding="utf-8")
    result = sanitize(str(path))
    assert not result.failures, result.failures
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.strip() == store)
    return [(code, at) for code, at, _ in result.findings], line


def test_a_combined_loss_overwritten_each_iteration_of_three_optimizers_is_not_a_leak(tmp_path: Path) -> None:
    findings, _ = run_three(tmp_path, "", "loss_D = (loss_D_A + loss_D_B) / 2")
    assert findings == []


@pytest.mark.parametrize("head, store", [("running_loss = 0.0", "running_loss += loss_D_A + loss_D_B"), ("history = []", "history.append(loss_D_A)")])
def test_what_grows_every_iteration_of_three_optimizers_is_still_a_leak(tmp_path: Path, head: str, store: str) -> None:
    findings, line = run_three(tmp_path, head, store)
    assert findings == [("GF301", line)]


def test_the_recorder_keeps_freed_graphs_of_two_iterations_at_most() -> None:
    """A freed graph's nodes still hold what a node keeps outside its saved tensors (here a
    custom Function's context field): the recorder lets go of them after two iterations."""
    import weakref

    from fixer.runtime.session import Session

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.buffer = torch.zeros(1000)  # not a saved tensor: lives as long as the node
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    alive = []
    with Session():
        for _ in range(10):
            out = Scale.apply(model(torch.randn(4, 3)))
            alive.append(weakref.ref(out.grad_fn.buffer) if hasattr(out.grad_fn, "buffer") else None)
            optimizer.zero_grad()
            out.sum().backward()
            optimizer.step()
        del out
        kept = sum(ref is not None and ref() is not None for ref in alive)
    assert kept <= 2


RETAINED = """\
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(50):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(torch.randn(8, 3)), torch.randn(8, 1))
    loss.backward(retain_graph=True)
    optimizer.step()
"""


def test_needless_retain_graph_is_found_under_max_steps_from_the_graphs_that_died_unwalked(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(RETAINED, encoding="utf-8")
    result = sanitize(str(path), max_steps=20)
    assert result.stopped and [(code, line) for code, line, _ in result.findings] == [("GF302", 10)]


def test_a_retained_graph_walked_again_after_an_early_stop_is_not_reported(tmp_path: Path) -> None:
    """Each iteration's kept graph is walked by a second backward: needed, decided or not."""
    path = tmp_path / "train.py"
    path.write_text(RETAINED.replace("    optimizer.step()\n", "    (loss * 2).backward()\n    optimizer.step()\n"), encoding="utf-8")
    result = sanitize(str(path), max_steps=20)
    assert result.stopped and result.findings == ()


def test_a_report_after_a_progress_line_starts_on_a_line_of_its_own(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent("""\
        import sys
        import torch
        from torch import nn

        model = nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        history = []
        for step in range(12):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(torch.randn(8, 3)), torch.randn(8, 1))
            loss.backward()
            optimizer.step()
            history.append(loss)
            sys.stdout.write(f"\\r[step {step}]")
    """), encoding="utf-8")
    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-m", "fixer", "run", str(path)], capture_output=True, cwd=root, timeout=300)
    lines = done.stdout.split(b"\n")
    assert lines[0].endswith(b"\r[step 11]")  # the program's own last line, then the report
    assert any(b" GF301 " in line for line in lines)
    assert all(b"[step" not in line for line in lines if b"GF301" in line)


def test_a_distributions_calls_run_unrecorded_and_what_they_return_or_store_carries_the_calling_line() -> None:
    """An actor-critic's tiny steps: ``log_prob``'s dozen inner torch calls do not pass through
    the recorder (one record, its result's), as inside a library module; nothing stays installed."""
    from torch.distributions import Categorical

    from fixer.runtime import graphwalk
    from fixer.runtime.session import Session

    original = Categorical.log_prob
    logits = torch.randn(3, requires_grad=True)
    with Session() as session:
        m = Categorical(logits=logits)  # call: constructor
        before = session.recorder.position
        log_prob = m.log_prob(torch.tensor(1))  # call: log_prob
        recorded = session.recorder.position - before
    line = lambda text: next(n for n, source in enumerate(Path(__file__).read_text().splitlines(), 1) if source.endswith(text))  # noqa: E731
    assert recorded == 1
    assert graphwalk.record(log_prob.grad_fn).stack[0][1] == line("# call: log_prob")
    assert graphwalk.record(m.logits.grad_fn).stack[0][1] == line("# call: constructor")
    assert Categorical.log_prob is original
