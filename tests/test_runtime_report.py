"""What a PyTorch user reads after `graphfix run` stopped on a freed graph (issue 24 §8): the
program's own traceback kept (stderr, as Python prints it), iterations said as counts ("the
first iteration"), never as numbers a reader could take for the program's 0-based loop index,
`stored in` at the assignment that carries the graph across iterations (the reassignment in the
loop, not the initialisation before it), and the README's sample report as the tool prints it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="graphfix run needs torch")

ROOT = Path(__file__).resolve().parent.parent

CARRIED = """\
import torch

torch.manual_seed(0)
rnn = torch.nn.RNNCell(3, 4)
opt = torch.optim.SGD(rnn.parameters(), lr=0.1)


def init_hidden():
    return torch.zeros(1, 4)


def train(x):
    global hidden
    opt.zero_grad()
    hidden = rnn(x, hidden)
    loss = hidden.sum()
    loss.backward()
    opt.step()


hidden = init_hidden()  # the state, carried across chunks
for step in range(3):
    train(torch.randn(1, 3))
    print("iteration", step)
"""


def graphfix_run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "fixer", "run", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_a_carried_state_is_reported_with_counted_iterations_its_assignment_and_the_traceback(tmp_path):
    (tmp_path / "train.py").write_text(CARRIED)
    done = graphfix_run("train.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    report = done.stdout.split("iteration 0\n", 1)[1]  # the program printed its own 0-based count
    assert report.startswith("train.py:15:5: GF101 `hidden` built in the first iteration (line 15) is carried into the second iteration (line 15) ")
    assert "    built:            train.py:15 (first iteration): hidden = rnn(x, hidden)\n" in report
    assert "    stored in hidden: train.py:15: hidden = rnn(x, hidden)\n" in report  # not line 21's init_hidden()
    assert "    used again:       train.py:15 (second iteration): hidden = rnn(x, hidden)\n" in report
    assert not re.search(r"iteration \d", report)
    traceback = done.stderr[done.stderr.index("Traceback (most recent call last):"):]
    assert 'File "' in traceback and "train.py\", line 23, in <module>" in traceback and "train.py\", line 17, in train" in traceback
    assert "RuntimeError: Trying to backward through the graph a second time" in traceback
    assert "fixer/runtime" not in traceback  # graphfix's own frames are left out
    assert traceback.index("RuntimeError: Trying") < traceback.index("graphfix run: graphfix's diagnosis of this RuntimeError follows")


def test_the_readme_sample_report_is_what_graphfix_run_prints():
    readme = (ROOT / "README.md").read_text()
    start = readme.index("examples/seed002_reused_subgraph.py:14:1: GF102")
    sample = readme[start:readme.index("```", start)]
    done = graphfix_run("examples/seed002_reused_subgraph.py", cwd=ROOT)
    assert done.returncode == 1, done.stderr
    printed = "".join(line for line in done.stdout.splitlines(keepends=True) if not line.startswith("iteration "))
    assert printed == sample
