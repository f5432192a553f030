"""A model's fields walked by the training loop of another file: the class in ``helpers.py``, the
loop in the script that imports it. GF110 (a graph stored at setup), GF111 (a graph written into a
kept tensor) and GF112 read the loops of the files importing the class (``loop_reach``: a field
known by its class across files), a setup method run once by the script (``run_once`` reads the
project's callers) and what every call of the writing method passes there. A script that stores
the field itself, hands the method or the setup on, or passes no graph leaves nothing to report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixer.engine import Options, process_file
from fixer.registry import all_rules

HEADER = "import torch\nfrom torch import nn\n"

MODELS = HEADER + '''

class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(4, 4)
        self.scale = nn.Parameter(torch.zeros(1)).exp()

    def forward(self, x):
        return self.net(x) * self.scale


class Bank:
    def __init__(self, rows, dim):
        self.rows = torch.zeros(rows, dim)

    def write(self, values, ids):
        self.rows.index_copy_(0, ids, values)

    def penalty(self):
        return self.rows.pow(2).mean()


class Fitter:
    def __init__(self):
        self.net = nn.Linear(3, 1)

    def configure(self):
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
        self.penalty = self.net(torch.ones(1, 3)).pow(2).sum()

    def fit(self, xs):
        for x in xs:
            loss = self.net(x).pow(2).mean() + self.penalty
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()


def main():
    fitter = Fitter()
    fitter.configure()
    fitter.fit([torch.randn(4, 3) for _ in range(3)])
'''

SCALED_SCRIPT = HEADER + '''from helpers import Scaled

torch.manual_seed(0)
model = Scaled()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
{before}
for step in range(3):
    loss = model(torch.randn(2, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(loss.item())
'''

BANK_SCRIPT = HEADER + '''from helpers import Bank

encoder = nn.Linear(4, 3)
bank = Bank(2, 3)
opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
{before}
for step in range(3):
    features = encoder(torch.randn(2, 4))
    bank.write({written}, torch.arange(2))
    loss = features.pow(2).mean() + bank.penalty()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def _findings(folder: Path, files: dict[str, str], fix: bool = False):
    for name, text in files.items():
        (folder / name).write_text(text)
    result = process_file(str(folder / "helpers.py"), Options(rules=tuple(all_rules()), fix=fix, unsafe=fix))
    assert not result.errors
    return result


@pytest.mark.parametrize(
    "before, expected",
    [
        ("", ["GF110"]),  # the script's loop walks the graph __init__ built once
        ("model.scale = torch.ones(1)", []),  # the script stores the field itself: its life is not the class's
        ("model.scale.detach_()", []),  # the script cuts it in place
    ],
)
def test_setup_graph_walked_by_the_loop_of_the_importing_script(tmp_path, before, expected):
    result = _findings(tmp_path, {"helpers.py": MODELS, "train.py": SCALED_SCRIPT.format(before=before)})
    assert [d.code for d in result.diagnostics] == expected
    if expected:
        assert "the loop at line 9 of train.py" in result.diagnostics[0].message


@pytest.mark.parametrize(
    "before, written, expected",
    [
        ("", "features", ["GF111"]),  # every call passes a graph, the loop reads the bank
        ("", "features.detach()", []),  # the script writes data only
        ("record = bank.write", "features", []),  # the method handed on: its other calls are unknown
        ("bank.rows = torch.zeros(2, 3)", "features", []),  # the script stores the field itself
    ],
)
def test_graph_written_into_a_kept_tensor_by_the_importing_script(tmp_path, before, written, expected):
    files = {"helpers.py": MODELS, "train.py": BANK_SCRIPT.format(before=before, written=written)}
    assert [d.code for d in _findings(tmp_path, files).diagnostics] == expected


@pytest.mark.parametrize(
    "script, expected",
    [
        ("from helpers import main\n\nmain()\n", ["GF110"]),  # configure runs once: main is called once, at the top
        ("from helpers import main\n\nrun = main\nrun()\n", []),  # handed on: when it runs is unknown
        ("from helpers import main\n\nfor epoch in range(2):\n    main()\n", []),  # called in a loop: not setup code
    ],
)
def test_setup_method_run_once_by_the_importing_script(tmp_path, script, expected):
    files = {"helpers.py": MODELS, "train.py": script}
    assert [d.code for d in _findings(tmp_path, files).diagnostics] == expected


def test_the_fix_in_the_class_file_lets_the_script_train(tmp_path):
    script = SCALED_SCRIPT.format(before="")
    result = _findings(tmp_path, {"helpers.py": MODELS, "train.py": script}, fix=True)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    before = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert before.returncode != 0 and "backward through the graph a second time" in before.stderr
    (tmp_path / "helpers.py").write_text(result.fixed)
    after = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert after.returncode == 0, after.stderr


STATEFUL = HEADER + '''

class Drift(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)
        self.offset = torch.zeros(1, 3)

    def forward(self, x):
        out = self.proj(x) - self.offset
        self.offset = 0.5 * self.offset + 0.5 * out.mean(0, keepdim=True)
        return out

    def rewind(self):
        self.offset = torch.zeros(1, 3)
'''

DRIFT_SCRIPT = HEADER + '''from helpers import Drift

model = Drift()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
{before}
for step in range(4):
    x = torch.randn(5, 3)
{each}
    loss = (model(x) - x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


@pytest.mark.parametrize(
    "before, each, extra, expected",
    [
        ("model.rewind()", "", {}, ["GF104"]),  # rewound once, before the loop: every step carries the last graph
        ("", "    model.rewind()", {}, []),  # rewound at each step, before the forward: managed
        ("model.rewind()", "    keep = model.rewind", {}, []),  # handed on: it may run anywhere
        ("model.rewind()", "", {"hooks.py": "def on_batch(m):\n    m.rewind()\n"}, []),  # a file around may call it between steps
    ],
)
def test_state_reset_by_the_loop_of_the_importing_script(tmp_path, before, each, extra, expected):
    files = {"helpers.py": STATEFUL, "train.py": DRIFT_SCRIPT.format(before=before, each=each), **extra}
    assert [d.code for d in _findings(tmp_path, files).diagnostics] == expected


LEAKY = HEADER + '''

class Leaky(nn.Module):
    def __init__(self, keep):
        super().__init__()
        self.potential, self.keep = torch.zeros(1), keep

    def forward(self, drive):
        leaked = self.keep * self.potential
        self.potential = leaked + drive
        return torch.sigmoid(self.potential)


class Runner:
    def __init__(self, features, cell, optimizer):
        self.features, self.cell = features, cell
        self.optimizer = optimizer

    def step(self, x, y):
        self.optimizer.zero_grad()
        loss = (self.cell({fed}) - y).pow(2).mean()
        loss.backward()
        self.optimizer.step()
'''

LEAKY_SCRIPT = HEADER + '''from helpers import Leaky, Runner

features = nn.Linear(3, 2)
runner = Runner(features, Leaky(0.7), torch.optim.SGD(features.parameters(), lr=0.1))
for x, y in zip(torch.randn(3, 4, 3), torch.rand(3, 4, 2)):
    runner.step(x, y)
'''


@pytest.mark.parametrize(
    "fed, expected",
    [
        ("self.features(x)", ["GF104"]),  # the script gives the runner the cell: every call passes a graph
        ("x[:, :2]", []),  # the cell is fed raw data: it keeps no graph
    ],
)
def test_module_held_by_a_trainer_the_importing_script_builds(tmp_path, fed, expected):
    files = {"helpers.py": LEAKY.format(fed=fed), "train.py": LEAKY_SCRIPT}
    assert [d.code for d in _findings(tmp_path, files).diagnostics] == expected


CHUNKED = HEADER + '''

class Chunked:
    def __init__(self, net, parts):
        self.net, self.parts = net, parts

    def feed(self, x, y):
        self.last_loss = (self.net(x) - y).abs().mean() / self.parts
{backward}
'''

CHUNKED_SCRIPT = HEADER + '''from helpers import Chunked

net = nn.Linear(3, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
runner = Chunked(net, 2)
for step in range(2):
    opt.zero_grad()
    runner.feed(torch.randn(4, 3), torch.randn(4, 2))
    final = runner.last_loss
    final.backward()
    opt.step()
'''


@pytest.mark.parametrize(
    "backward, expected",
    [
        ("        self.last_loss.backward()", ["GF106"]),  # the method frees the field's graph; the script walks it again
        ("        self.last_loss.item()", []),  # the script's backward is the only one
    ],
)
def test_field_of_another_files_object_backpropagated_again(tmp_path, backward, expected):
    (tmp_path / "helpers.py").write_text(CHUNKED.format(backward=backward))
    (tmp_path / "train.py").write_text(CHUNKED_SCRIPT)
    result = process_file(str(tmp_path / "train.py"), Options(rules=tuple(all_rules())))
    assert not result.errors and [d.code for d in result.diagnostics] == expected
