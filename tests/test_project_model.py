"""The analysis sees across files of one project: a module class imported from another file (any
import spelling) is read as if it were defined here; what cannot be found stays unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixer.engine import Options, process_file
from fixer.registry import all_rules

ROOT = Path(__file__).resolve().parent.parent

FIXTURE = ROOT / "fixtures/separate_backward_through_shared_graph/actor_critic_shared_trunk.before.py"
HEADER = "import torch\nfrom torch import nn\nimport torch.nn.functional as F\n"


def _split(text: str) -> tuple[str, str]:
    """(the module class alone, the rest of the program) of the fixture."""
    start, end = text.index("class ActorCritic"), text.index("def update")
    return HEADER + "\n\n" + text[start:end], text[:start] + "{import_line}\n\n\n" + text[end:]


MODEL, TRAIN = _split(FIXTURE.read_text())
TRAIN = TRAIN.replace("model = ActorCritic()", "model = {construct}")
# two heads straight on the input: the outputs share no graph, two backward passes are fine
SEPARATE = MODEL.replace("self.policy(features), self.value(features)", "self.policy(states), self.value(states)").replace(
    "features = self.trunk(states)", "pass"
).replace("nn.Linear(16, 2)", "nn.Linear(4, 2)").replace("nn.Linear(16, 1)", "nn.Linear(4, 1)")

# (file holding the class, import statement, construction) for each way of importing it
SPELLINGS = {
    "from-module": ("models.py", "from models import ActorCritic", "ActorCritic()"),
    "from-module-as": ("models.py", "from models import ActorCritic as AC", "AC()"),
    "import-module": ("models.py", "import models", "models.ActorCritic()"),
    "import-module-as": ("models.py", "import models as m", "m.ActorCritic()"),
    "relative": ("pkg/models.py", "from .models import ActorCritic", "ActorCritic()"),
    "relative-module": ("pkg/models.py", "from . import models", "models.ActorCritic()"),
    "package-reexport": ("pkg/nets/core.py", "from .nets import ActorCritic", "ActorCritic()"),
}


def _project(tmp_path: Path, spelling: str, model: str) -> Path:
    module, import_line, construct = SPELLINGS[spelling]
    folder = tmp_path / "pkg" if module.startswith("pkg/") else tmp_path
    for package in {tmp_path / "pkg", tmp_path / "pkg" / "nets"} if folder != tmp_path else ():
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text("")
    if spelling == "package-reexport":
        (tmp_path / "pkg" / "nets" / "__init__.py").write_text("from .core import ActorCritic\n")
    (tmp_path / module).write_text(model)
    train = folder / "train.py"
    train.write_text(TRAIN.replace("{import_line}", import_line).replace("{construct}", construct))
    return train


def _codes(path: Path) -> list[str]:
    result = process_file(str(path), Options(rules=tuple(all_rules())))
    assert not result.errors
    return [d.code for d in result.diagnostics]


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_imported_module_class_is_read(tmp_path, spelling):
    assert _codes(_project(tmp_path, spelling, MODEL)) == ["GF105"]


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_imported_module_class_without_shared_graph_stays_silent(tmp_path, spelling):
    assert _codes(_project(tmp_path, spelling, SEPARATE)) == []


def test_unresolvable_import_stays_unknown(tmp_path):
    train = _project(tmp_path, "from-module", MODEL)
    (tmp_path / "models.py").unlink()  # an installed package, say: nothing is known about it
    assert _codes(train) == []


def test_import_cycle_terminates(tmp_path):
    train = _project(tmp_path, "from-module", "from train import update\n" + MODEL)
    assert _codes(train) == ["GF105"]


# The GRU fixture with its loop body moved into a step function that takes and returns the hidden
# state: the loop carries `hidden` into the next call, whose backward walks the freed graph.
GRU = ROOT / "fixtures/graph_carried_across_iterations/gru_hidden_state.before.py"
STEP = '''

def train_step(x, y, hidden):
    {cut}out, hidden = rnn(x, hidden)
    loss = nn.functional.mse_loss(head(out), y)
    optimizer.zero_grad()
    {backward}
    optimizer.step()
    return loss, hidden

'''
LOOP = '''
hidden = torch.zeros(1, 1, 4)
for start in range(0, 20, 5):
    x, y = sequence[:, start : start + 5], targets[:, start : start + 5]
    loss, hidden = train_step(x, y, hidden)
final_loss = loss.item()
'''
STEP_VARIANTS = {  # name -> (cut at the step's start, backward statement, expected finding)
    "carried": ("", "loss.backward()", ["GF101"]),
    "cut-inside-step": ("hidden = hidden.detach()\n    ", "loss.backward()", []),
    "backward-only-sometimes": ("", "if y.sum() > 100:\n        loss.backward()", []),
}


def _step_program(variant: str) -> tuple[str, str]:
    """(setup and step function, the loop calling it) from the fixture's text."""
    cut, backward, _ = STEP_VARIANTS[variant]
    text = GRU.read_text()
    setup = text[: text.index("hidden = torch.zeros")]
    return setup + STEP.replace("{cut}", cut).replace("{backward}", backward), LOOP


@pytest.mark.parametrize("variant", sorted(STEP_VARIANTS))
def test_loop_calling_a_step_function(tmp_path, variant):
    setup, loop = _step_program(variant)
    (tmp_path / "train.py").write_text(setup + loop)
    assert _codes(tmp_path / "train.py") == STEP_VARIANTS[variant][2]


@pytest.mark.parametrize("variant", sorted(STEP_VARIANTS))
def test_loop_calling_a_step_function_of_another_module(tmp_path, variant):
    setup, loop = _step_program(variant)
    (tmp_path / "steps.py").write_text(setup)
    (tmp_path / "train.py").write_text("import torch\nfrom steps import train_step, sequence, targets\n" + loop)
    assert _codes(tmp_path / "train.py") == STEP_VARIANTS[variant][2]


def test_step_function_fix_gives_the_expert_numbers(tmp_path):
    pytest.importorskip("torch")
    from tests.execution import compare_states, is_autograd_error, run_program

    setup, loop = _step_program("carried")
    program = tmp_path / "train.py"
    program.write_text(setup + loop)
    assert is_autograd_error(run_program(program).error)
    result = process_file(str(program), Options(rules=tuple(all_rules()), fix=True, unsafe=True, write=True))
    assert result.written and not result.remaining
    fixed, expert = run_program(program), run_program(GRU.with_name("gru_hidden_state.oracle.py"))
    assert fixed.error is None
    shared = fixed.state.keys() & expert.state.keys()
    assert {k for k in shared if k.startswith(("rnn.", "head."))} and "final_loss" in shared
    assert compare_states({k: expert.state[k] for k in shared}, {k: fixed.state[k] for k in shared}) is None


# Both losses of one forward pass are handed to a helper that backpropagates and steps: the first
# call frees the shared trunk's graph, the second fails. No edit can merge them across the calls.
HELPER_UPDATES = '''

def apply(optimizer, loss):
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


torch.manual_seed(0)
model = ActorCritic()
actor_opt = torch.optim.Adam(list(model.policy.parameters()), lr=0.01)
critic_opt = torch.optim.Adam(model.value.parameters(), lr=0.01)
states, returns = torch.randn(32, 4), torch.randn(32)
for epoch in range(3):
    logits, values = model(states)
    policy_loss = -(F.log_softmax(logits, dim=1)[:, 0] * (returns - values.detach().squeeze(1))).mean()
    value_loss = F.mse_loss(values.squeeze(1), returns)
    apply(actor_opt, policy_loss)
    apply(critic_opt, value_loss)
'''


@pytest.mark.parametrize("model, expected", [(MODEL, ["GF105"]), (SEPARATE, [])], ids=["shared-trunk", "separate-heads"])
def test_losses_backpropagated_by_a_helper(tmp_path, model, expected):
    program = tmp_path / "train.py"
    program.write_text(model + HELPER_UPDATES)
    result = process_file(str(program), Options(rules=tuple(all_rules())))
    assert [d.code for d in result.diagnostics] == expected
    assert all(d.fix is None for d in result.diagnostics)  # reported, never merged across calls


GAN_METHODS = '''import torch
from torch import nn


class GAN:
    def __init__(self):
        self.G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3))
        self.D = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
        self.opt_g = torch.optim.Adam(self.G.parameters(), lr=1e-3)
        self.opt_d = torch.optim.Adam(self.D.parameters(), lr=1e-3)

    def generator_step(self, fake):
        g_loss = nn.functional.softplus(-self.D(fake)).mean()
        self.opt_g.zero_grad()
        g_loss.backward()
        self.opt_g.step()

    def discriminator_step(self, real, fake):
        d_loss = nn.functional.softplus(-self.D(real)).mean() + nn.functional.softplus(self.D({fake})).mean()
        self.opt_d.zero_grad()
        d_loss.backward()
        self.opt_d.step()

    def train_step(self, real):
        fake = self.G(torch.randn(real.size(0), 2))
        self.generator_step(fake)
        self.discriminator_step(real, fake)


torch.manual_seed(0)
gan = GAN()
for i in range(3):
    gan.train_step(torch.randn(4, 3))
'''


@pytest.mark.parametrize("fake, expected", [("fake", ["GF103"]), ("fake.detach()", [])], ids=["undetached", "detached"])
def test_gan_steps_in_methods(tmp_path, fake, expected):
    """Zeroing inside the step methods counts for the loop that calls them (no GF203); the D step on
    the undetached fake after the G step walks G's freed graph: GF103 names the cause in the D step
    method and detaches the fake there (GF105, which saw the two step calls share G's graph, defers)."""
    program = tmp_path / "train.py"
    program.write_text(GAN_METHODS.replace("{fake}", fake))
    result = process_file(str(program), Options(rules=tuple(all_rules())))
    assert [d.code for d in result.diagnostics] == expected
    assert all(d.fix is not None and d.line == 19 for d in result.diagnostics)


def test_reexport_in_parenthesised_import(tmp_path):
    train = _project(tmp_path, "package-reexport", MODEL)
    (tmp_path / "pkg" / "nets" / "__init__.py").write_text("from .core import (\n    ActorCritic,\n)\n")
    assert _codes(train) == ["GF105"]


def _two_repositories(tmp_path: Path) -> Path:
    """repos/repoA/train.py imports ``repoB.models``: found through the packages above repoA,
    but repoB is another project."""
    for package in ("repos", "repos/repoA", "repos/repoB"):
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "repos/repoB/models.py").write_text(MODEL)
    train = tmp_path / "repos/repoA/train.py"
    train.write_text(TRAIN.replace("{import_line}", "from repoB.models import ActorCritic").replace("{construct}", "ActorCritic()"))
    return train


def test_imports_never_resolve_outside_the_project(tmp_path):
    train = _two_repositories(tmp_path)
    assert _codes(train) == ["GF105"]  # no project known: resolved through the packages, as before
    bounded = process_file(str(train), Options(rules=tuple(all_rules()), root=str(tmp_path / "repos/repoA")))
    assert [d.code for d in bounded.diagnostics] == []  # a batch run names the repository
    whole = process_file(str(train), Options(rules=tuple(all_rules()), root=str(tmp_path / "repos")))
    assert [d.code for d in whole.diagnostics] == ["GF105"]  # one project holding both: resolved


def test_imports_never_resolve_outside_the_git_repository(tmp_path):
    train = _two_repositories(tmp_path)
    (tmp_path / "repos/repoA/.git").mkdir()
    assert _codes(train) == []


def test_parsed_project_files_stay_bounded_over_many_files(tmp_path, monkeypatch):
    """A batch of many repositories must not keep every imported file's tree: the runner drops
    the oldest between files, and what is dropped is parsed again when needed."""
    from fixer.analysis import project_files
    from fixer.runner import run

    monkeypatch.setattr(project_files, "MAX_LOADED", 4)
    monkeypatch.setattr(project_files, "_loaded", {})
    for i in range(6):
        (tmp_path / str(i)).mkdir()
    trains = [str(_project(tmp_path / str(i), "from-module", MODEL)) for i in range(6)]
    trains += trains[:2]  # their models.py files were dropped: read again, same answer
    sizes = []
    results = run(trains[:6], Options(rules=tuple(all_rules())), jobs=1, on_result=lambda _: sizes.append(len(project_files._loaded)))
    results += run(trains[6:], Options(rules=tuple(all_rules())), jobs=1)
    assert [[d.code for d in r.diagnostics] for r in results] == [["GF105"]] * 8
    assert max(sizes) <= 4 and len(project_files._loaded) <= 4
