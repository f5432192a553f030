"""A function or class defined in one file and used by another: what the importing files do with it
is read as if it were written beside it (GF302 needs every caller of a function that returns its
loss, every caller of a backward helper, and the configuration a trainer is built with). A use
that is not a call, a star import, or an import never used (a re-export) leaves the callers
unknown, and then nothing is reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixer.analysis.project_text import STEP_CALL, imported_by_matching
from fixer.engine import Options, process_file
from fixer.registry import all_rules

HEADER = "import torch\nfrom torch import nn\n"

RETURNS_LOSS = HEADER + '''

def fit(model, batches, optimizer):
    for x, y in batches:
        optimizer.zero_grad()
        loss = nn.functional.l1_loss(model(x), y)
        loss.backward(retain_graph=True)
        optimizer.step()
    return loss
'''

FIT_SCRIPT = HEADER + '''{imports}

model = nn.Linear(4, 2)
batches = [(torch.randn(6, 4), torch.randn(6, 2)) for _ in range(3)]
last = fit(model, batches, torch.optim.SGD(model.parameters(), lr=0.1))
{use}
'''

BACKPROP = HEADER + '''

def backprop(loss):
    loss.backward(retain_graph=True)
'''

BACKPROP_SCRIPT = HEADER + '''from helpers import backprop

model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    optimizer.zero_grad()
    loss = model(torch.randn(5, 3)).pow(2).mean()
    backprop(loss)
{after}
    optimizer.step()
'''

SETTINGS = '''from dataclasses import dataclass


@dataclass
class Settings:
    epochs: int = 2
    retain: bool = True
'''

REGRESSION = HEADER + '''

class Regression:
    def __init__(self, settings):
        self.settings = settings
        self.net = nn.Linear(4, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def run(self, x, y):
        for _ in range(self.settings.epochs):
            self.opt.zero_grad()
            loss = nn.functional.mse_loss(self.net(x), y)
            loss.backward(retain_graph=self.settings.retain)
            self.opt.step()
        return loss.item()
'''

REGRESSION_SCRIPT = HEADER + '''from settings import Settings
from helpers import Regression

settings = Settings()
task = Regression(settings)
{between}
print(task.run(torch.randn(8, 4), torch.randn(8, 1)))
'''


def _codes(folder: Path, files: dict[str, str]) -> list[str]:
    for name, text in files.items():
        (folder / name).write_text(text)
    result = process_file(str(folder / "helpers.py"), Options(rules=tuple(all_rules())))
    assert not result.errors
    return [d.code for d in result.diagnostics]


@pytest.mark.parametrize(
    "imports, use, extra, expected",
    [
        ("from helpers import fit", "print(float(last))", {}, ["GF302"]),  # read for a number only
        ("from helpers import fit", "last.backward()", {}, []),  # the caller walks the graph again
        ("from helpers import fit", "runner = fit\nprint(float(last))", {}, []),  # named, not called: a caller out of sight
        ("from helpers import *", "runner = fit\nprint(float(last))", {}, []),  # the same through a star import
        ("import helpers\nfit = helpers.fit", "print(float(last))", {}, []),
        ("from helpers import fit", "print(float(last))", {"api.py": "from helpers import fit\n", "main.py": "from api import fit\n"}, []),  # re-exported
        ("from helpers import fit", "print(float(last))", {"unused.py": "from helpers import fit\n"}, ["GF302"]),  # imported, not used by anyone
    ],
)
def test_callers_of_a_function_returning_its_loss_in_another_file(tmp_path, imports, use, extra, expected):
    files = {"helpers.py": RETURNS_LOSS, "train.py": FIT_SCRIPT.format(imports=imports, use=use), **extra}
    assert _codes(tmp_path, files) == expected


@pytest.mark.parametrize(
    "after, expected",
    [
        ("    print(loss.item())", ["GF302"]),  # every caller reads the loss for a number after it
        ("    loss.backward()", []),  # a caller backpropagates through the same graph again
        ("    kept = backprop", []),  # the helper handed on: its other callers are unknown
    ],
)
def test_callers_of_a_backward_helper_in_another_file(tmp_path, after, expected):
    assert _codes(tmp_path, {"helpers.py": BACKPROP, "train.py": BACKPROP_SCRIPT.format(after=after)}) == expected


@pytest.mark.parametrize(
    "between, expected",
    [
        ("", ["GF302"]),  # the one construction gives the default True for the object's life
        ("task.settings = Settings(retain=False)", []),  # stored from outside the class: unknown
        ("task = Regression(Settings(retain=False))", []),  # a second construction: which one, unknown
    ],
)
def test_configuration_given_at_construction_in_another_file(tmp_path, between, expected):
    files = {"settings.py": SETTINGS, "helpers.py": REGRESSION, "train.py": REGRESSION_SCRIPT.format(between=between)}
    assert _codes(tmp_path, files) == expected


LEDGER = HEADER + '''

class Ledger:
    """Keeps a running sum of what it is shown and how many values it saw."""

    def __init__(self):
        self.balance, self.seen = 0.0, 0

    def post(self, amounts):
        self.seen += len(amounts)
        for amount in amounts:
            self.balance += amount

    def report(self):
        return round(float(self.balance) / (self.seen or 1), 4)
'''

LEDGER_SCRIPT = HEADER + '''from helpers import Ledger

model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
book = Ledger()
for _ in range(3):
    loss = model(torch.randn(4, 3)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    book.post([{posted}])
{after}
'''


@pytest.mark.parametrize(
    "posted, after, expected",
    [
        ("loss", "print(book.report())", ["GF301"]),  # a file with no backward, used by a training script
        ("loss.item()", "print(book.report())", []),  # numbers only
        ("loss", "def show(b):\n    print(b.balance)\nshow(book)", []),  # handed to a function of another file: read unseen
        ("loss", "total = book.balance\ntotal.backward()", []),  # the script backpropagates the field
    ],
)
def test_object_of_another_file_keeps_what_a_training_script_gives_it(tmp_path, posted, after, expected):
    files = {"helpers.py": LEDGER, "train.py": LEDGER_SCRIPT.format(posted=posted, after=after)}
    assert _codes(tmp_path, files) == expected


STEP_WITH_LEDGER = LEDGER + '''

def run_batch(model, optimizer, book):
    loss = model(torch.randn(4, 3)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    book.post([loss])


class Trainer:
    def __init__(self, model, optimizer, book):
        self.model, self.optimizer, self.book = model, optimizer, book

    def fit_batch(self):
        loss = self.model(torch.randn(4, 3)).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.book.post([loss])
'''

STEP_SCRIPT = HEADER + '''from helpers import Ledger, Trainer, run_batch

model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
book = Ledger()
{body}
'''


@pytest.mark.parametrize(
    "body, expected",
    [
        ("for _ in range(3):\n    run_batch(model, optimizer, book)\nprint(book.report())", ["GF301"]),
        ("for _ in range(3):\n    book = Ledger()\n    run_batch(model, optimizer, book)\n    print(book.report())", []),  # one per step
        ("for _ in range(3):\n    run_batch(model, optimizer, book)\nprint(book)", []),  # handed on: read unseen
        ("trainer = Trainer(model, optimizer, book)\nfor _ in range(3):\n    trainer.fit_batch()\nprint(book.report())",
         ["GF301"]),  # the trainer's field, given by the script's one construction
        ("trainer = Trainer(model, optimizer, book)\nfor _ in range(3):\n    trainer.book = Ledger()\n    trainer.fit_batch()", []),
    ],
)
def test_step_function_of_another_file_given_the_object_by_the_script(tmp_path, body, expected):
    assert _codes(tmp_path, {"helpers.py": STEP_WITH_LEDGER, "train.py": STEP_SCRIPT.format(body=body)}) == expected


HALVER = HEADER + '''

class Halver:
    def run(self, loss):
        (0.5 * loss).backward()


def step(net, opt, wrapper, x):
    out = net(x)
    opt.zero_grad()
    wrapper.run(out.pow(2).mean())
    wrapper.run(out.abs().mean())
    opt.step()
'''

HALVER_SCRIPT = HEADER + '''from helpers import Halver, step


class Keeper:
    def run(self, loss):
        loss.backward(retain_graph=True)


net = nn.Linear(3, 2)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(3):
    step(net, opt, {wrapper}, torch.randn(4, 3))
'''


@pytest.mark.parametrize("wrapper, expected", [("Halver()", ["GF105"]), ("Keeper()", [])])
def test_method_of_a_parameter_the_importing_script_gives_an_instance(tmp_path, wrapper, expected):
    """``wrapper.run`` is Halver's method only when every call in the project passes a Halver."""
    assert _codes(tmp_path, {"helpers.py": HALVER, "train.py": HALVER_SCRIPT.format(wrapper=wrapper)}) == expected


METERED = HEADER + '''

class Meter:
    def __init__(self):
        self.total = 0.0

    def update(self, value):
        self.total += value


class Regressor:
    def __init__(self, net, meter):
        self.net, self.meter = net, meter
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def fit_batch(self, x):
        loss = self.net(x).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.meter.update(loss)
'''

METERED_SCRIPT = HEADER + '''from helpers import Meter, Regressor


class Rounded:
    def __init__(self):
        self.total = 0.0

    def update(self, value):
        self.total += round(float(value), 3)


meter = {meter}
model = Regressor(nn.Linear(3, 1), meter)
for _ in range(3):
    model.fit_batch(torch.randn(4, 3))
print(meter.total)
'''


@pytest.mark.parametrize("meter, expected", [("Meter()", ["GF301"]), ("Rounded()", [])])
def test_meter_given_at_construction_in_another_file(tmp_path, meter, expected):
    assert _codes(tmp_path, {"helpers.py": METERED, "train.py": METERED_SCRIPT.format(meter=meter)}) == expected


PIPELINE = HEADER + '''

class Pipeline:
    def __init__(self, width):
        self.net = nn.Linear(width, width)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.05)

    def backward_net(self):
        self.loss = (self.y - self.x).pow(2).mean()
        self.loss.backward(retain_graph=True)

    def feed(self, x):
        self.x = x

    def run(self):
        self.y = self.net(self.x)

    def optimize(self):
        self.run()
        self.opt.zero_grad()
        self.backward_net()
        self.opt.step()
'''

PIPELINE_SCRIPT = HEADER + '''from helpers import Pipeline

pipe = Pipeline(4)
for _ in range(3):
    pipe.feed(torch.randn(5, 4))
    pipe.optimize()
{after}
'''


@pytest.mark.parametrize(
    "after, expected",
    [
        ("print(pipe.loss.item())", ["GF302"]),  # the script reads the field for a number only
        ("pipe.loss.backward()", []),  # it walks the graph the field holds again
        ("print(pipe)", []),  # the object handed on: any field may be read
        ("pipe.backward_net()", []),  # the script calls the backward method itself
    ],
)
def test_fields_of_an_object_a_script_of_another_file_uses(tmp_path, after, expected):
    assert _codes(tmp_path, {"helpers.py": PIPELINE, "train.py": PIPELINE_SCRIPT.format(after=after)}) == expected


@pytest.mark.parametrize(
    "script, imported",
    [
        (LEDGER_SCRIPT.format(posted="loss", after=""), True),  # trains: zero_grad, backward, step in its code
        ('"""Usage: loss.backward(); opt.zero_grad(); opt.step()"""\nfrom helpers import Ledger\n', False),  # only a docstring says so
    ],
)
def test_a_module_a_training_script_imports_passes_the_pre_filter(tmp_path, script, imported):
    (tmp_path / "helpers.py").write_text(LEDGER)
    (tmp_path / "train.py").write_text(script)
    assert imported_by_matching(str(tmp_path / "helpers.py"), STEP_CALL) is imported
