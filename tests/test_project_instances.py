"""A class defined in one file and used in another: the script that imports it constructs the
instances, passes the modules and calls the methods. What the script shows is read as if it were
written beside the class; an instance handed on, or a value the script cannot show, stays unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixer.engine import Options, process_file
from fixer.registry import all_rules

HEADER = "import torch\nfrom torch import nn\n"

TRAINER = HEADER + '''

class Trainer:
    def __init__(self, model):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

    def clear(self):
        self.optimizer.zero_grad()

    def step(self, x, y):
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.item()
'''

TRAIN_STEPS = HEADER + '''from helpers import Trainer

trainer = Trainer(nn.Linear(3, 2))
for x, y in [(torch.randn(4, 3), torch.randn(4, 2)) for _ in range(3)]:
{body}
'''


def _project(tmp_path: Path, helpers: str, train: str) -> tuple[Path, Path]:
    (tmp_path / "helpers.py").write_text(helpers)
    (tmp_path / "train.py").write_text(train)
    return tmp_path / "helpers.py", tmp_path / "train.py"


def _codes(path: Path) -> list[str]:
    result = process_file(str(path), Options(rules=tuple(all_rules())))
    assert not result.errors
    return [d.code for d in result.diagnostics]


@pytest.mark.parametrize(
    "body, expected",
    [
        ("    trainer.step(x, y)", ["GF203"]),  # nobody clears the gradients
        ("    trainer.clear()\n    trainer.step(x, y)", []),  # another method called in the loop does
        ("    trainer.optimizer.zero_grad()\n    trainer.step(x, y)", []),
        ("    run = trainer\n    run.step(x, y)", []),  # handed on: its calls are not followed
    ],
)
def test_method_called_per_batch_from_an_importing_script(tmp_path, body, expected):
    helpers, train = _project(tmp_path, TRAINER, TRAIN_STEPS.format(body=body))
    assert _codes(helpers) + _codes(train) == expected


NORM = HEADER + '''

def train_step(model, optimizer, criterion, inputs, targets):
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    grads = torch.autograd.grad(loss, list(model.parameters()))
    norm = sum(float(g.norm()) for g in grads)
    loss.backward()
    optimizer.step()
    return norm
'''

NORM_TRAIN = HEADER + '''from helpers import train_step

model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = {criterion}
norms = [train_step(model, optimizer, criterion, torch.randn(5, 3), torch.randn(5, 1)) for _ in range(3)]
'''


@pytest.mark.parametrize(
    "criterion, expected",
    [
        ("nn.MSELoss()", ["GF106"]),  # a module: its forward saves tensors, autograd.grad frees them
        ("make_criterion()", []),  # what the script passes is unknown
    ],
)
def test_parameters_given_modules_by_every_importing_caller(tmp_path, criterion, expected):
    helpers, train = _project(tmp_path, NORM, NORM_TRAIN.format(criterion=criterion))
    assert _codes(helpers) == expected


KEEPER = HEADER + '''

class Regressor:
    def __init__(self, net):
        self.net = net
        self.opt = torch.optim.SGD(net.parameters(), lr=0.05)

    def fit_batch(self, inputs, targets):
        self.opt.zero_grad()
        self.loss = nn.functional.mse_loss(self.net(inputs), targets)
        self.loss.backward(retain_graph=True)
        self.opt.step()
'''

KEEPER_TRAIN = HEADER + '''from helpers import Regressor

regressor = Regressor(nn.Linear(5, 2))
for batch in range(3):
    regressor.fit_batch(torch.randn(8, 5), torch.randn(8, 2))
    {use}
'''


@pytest.mark.parametrize(
    "use, expected",
    [
        ("print(regressor.loss.item())", ["GF302"]),  # the script reads the kept loss for numbers only
        ("regressor.loss.backward()", []),  # the script backpropagates it again: the retain is needed
    ],
)
def test_field_read_by_an_importing_script(tmp_path, use, expected):
    helpers, train = _project(tmp_path, KEEPER, KEEPER_TRAIN.format(use=use))
    assert _codes(helpers) == expected


AGENT = HEADER + '''

class Agent:
    def __init__(self):
        self.q = nn.Linear(4, 2)
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=0.01)

    def update(self, states, targets):
        self.optimizer.zero_grad()
        loss = nn.functional.smooth_l1_loss(self.q(states).amax(dim=1), targets)
        loss.backward()
        self.optimizer.step()
        return {returned}
'''

AGENT_TRAIN = HEADER + '''from helpers import Agent

agent = Agent()
losses = []
for step in range(3):
    losses.append(agent.update(torch.randn(5, 4), torch.randn(5)))
print(sum(losses) / len(losses))
'''


@pytest.mark.parametrize("returned, expected", [("loss", ["GF301"]), ("loss.item()", [])])
def test_loss_returned_by_an_imported_method(tmp_path, returned, expected):
    helpers, train = _project(tmp_path, AGENT.format(returned=returned), AGENT_TRAIN)
    assert _codes(train) == expected


def test_instance_kept_on_another_object_stays_unknown(tmp_path):
    """``self.reg = Regressor(...)``: the instance's uses are not followed (and nothing crashes)."""
    holder = KEEPER + '''

class Holder:
    def __init__(self):
        self.reg = Regressor(nn.Linear(5, 2))


holder = Holder()
for batch in range(3):
    holder.reg.fit_batch(torch.randn(8, 5), torch.randn(8, 2))
'''
    path = tmp_path / "train.py"
    path.write_text(holder)
    assert _codes(path) == []


@pytest.mark.parametrize(
    "helpers, train, expected",
    [
        (TRAINER, "from helpers import Trainer\nt = Trainer(net)\n", True),  # constructed: its methods run here
        (TRAINER, "from helpers import Trainer\nprint(Trainer.__doc__)\n", False),  # a class only dotted into
        ('class Options:\n    """A second .backward() raises."""\n    # loss.backward() twice fails\n', "from helpers import Options\no = Options()\n", False),
        ("def step(loss):\n    loss.backward()\n", "from helpers import step\nstep(loss)\n", True),
        ("def step(loss):\n    '''Calls loss.backward().'''\n", "from helpers import step\nstep(loss)\n", False),
    ],
)
def test_cross_file_pre_filter_counts_code_that_runs_here(tmp_path, helpers, train, expected):
    from fixer.analysis.project_files import forget_project_files
    from fixer.analysis.project_text import STEP_CALL, imports_matching

    _, script = _project(tmp_path, helpers, "for batch in data:\n    pass\n" + train)
    forget_project_files()
    assert imports_matching(str(script), script.read_bytes(), STEP_CALL) is expected


LOSS_HELPER = HEADER + '''

def compute_loss(criterion, output, target):
    return criterion(output, target)


def logged_loss(criterion, output, target):
    print("computing the loss")
    return criterion(output, target)
'''

LOSS_BEFORE_LOOP = HEADER + '''from helpers import {helper}

model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 3), torch.randn(8, 1)
criterion = nn.MSELoss()
output = model(x)
loss = {helper}(criterion, output, y)
for epoch in range(5):
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


@pytest.mark.parametrize("helper, recomputed", [("compute_loss", True), ("logged_loss", False)])
def test_loss_built_before_the_loop_by_an_imported_helper(tmp_path, helper, recomputed):
    """The imported helper's return is read as if it were written here: the loss carries the
    module's graph (GF102); it is recomputed in the loop only when the helper does nothing else."""
    _, train = _project(tmp_path, LOSS_HELPER, LOSS_BEFORE_LOOP.format(helper=helper))
    result = process_file(str(train), Options(rules=tuple(all_rules()), fix=True, unsafe=True))
    assert [d.code for d in result.diagnostics] == ["GF102"]
    fixed = result.fixed or ""
    assert ("    loss = %s(criterion, output, y)\n" % helper in fixed) is recomputed


@pytest.mark.parametrize("callers, known", [(2, True), (9, False)])
def test_callers_of_a_function_named_across_many_files_stay_unknown(tmp_path, callers, known):
    import ast

    from fixer.analysis.importers import MAX_CALLING_FILES, importer_calls
    from fixer.analysis.project_files import forget_project_files
    from fixer.analysis.scopes import scopes
    from fixer.context import FileContext

    helpers = tmp_path / "helpers.py"
    helpers.write_text("def train_step(model, batch):\n    model(batch).sum().backward()\n")
    for index in range(callers):
        (tmp_path / f"run{index}.py").write_text("from helpers import train_step\ntrain_step(net, data)\n")
    forget_project_files()
    text = helpers.read_text()
    ctx = FileContext(str(helpers), text, ast.parse(text))
    found = importer_calls(ctx, next(s for s in scopes(ctx) if getattr(s.node, "name", "") == "train_step"))
    assert (callers <= MAX_CALLING_FILES) is known
    if known:
        assert len(found) == callers and all(c.call is not None for c in found)
    else:
        assert [c.call for c in found] == [None]  # a use with no call: unknown
