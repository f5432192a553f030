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
    from fixer.analysis import project
    from fixer.runner import run

    monkeypatch.setattr(project, "MAX_LOADED", 4)
    monkeypatch.setattr(project, "_loaded", {})
    for i in range(6):
        (tmp_path / str(i)).mkdir()
    trains = [str(_project(tmp_path / str(i), "from-module", MODEL)) for i in range(6)]
    trains += trains[:2]  # their models.py files were dropped: read again, same answer
    sizes = []
    results = run(trains[:6], Options(rules=tuple(all_rules())), jobs=1, on_result=lambda _: sizes.append(len(project._loaded)))
    results += run(trains[6:], Options(rules=tuple(all_rules())), jobs=1)
    assert [[d.code for d in r.diagnostics] for r in results] == [["GF105"]] * 8
    assert max(sizes) <= 4 and len(project._loaded) <= 4
