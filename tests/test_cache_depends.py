"""The result cache on cross-file facts: an entry is reused only while every project file its
analysis (or the byte pre-filter's decision to analyse) depended on is unchanged, and a change
invalidates exactly the entries that depended on it. Each test tells a hit from a miss by the
cached messages ``mark_cached`` rewrote: a hit shows 'CACHED', an analysis the real message.

Several importers of one module are checked in one process (fewer files than a pool needs), so
the second one's answer comes through the per-process memos: its entry must record the module too."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from tests.test_cache import BUGGY, age, graphfix, index, mark_cached
from tests.test_project_model import MODEL, SEPARATE, _project, _step_program


def _findings(out) -> list[tuple[str, str]]:
    """(file name, message start) per finding line of a text report."""
    found = []
    for line in out.stdout.decode().splitlines():
        match = re.match(r"([^:]+):.* GF\d\d\d (?:\[.\] )?(.{6})", line)
        if match:
            found.append((os.path.basename(match.group(1)), match.group(2)))
    return sorted(found)


def _step_project(folder: Path, variant: str) -> None:
    """steps.py holds the training step (``variant`` of the project-model test); two loops import
    it and hold no backward themselves (only the pre-filter's look into steps.py analyses them);
    other.py imports nothing of the project."""
    setup, loop = _step_program(variant)
    (folder / "steps.py").write_text(setup)
    for name in ("train.py", "train2.py"):
        (folder / name).write_text("import torch\nfrom steps import train_step, sequence, targets\n" + loop)
    (folder / "other.py").write_text(BUGGY)


def test_a_step_function_moved_into_another_file(tmp_path):
    _step_project(tmp_path, "carried")
    age(*tmp_path.iterdir(), tmp_path)
    cold = graphfix(".", cwd=tmp_path)
    assert [c for c, _ in _findings(cold)] == ["other.py", "train.py", "train2.py"]
    for name in ("other.py", "train.py", "train2.py"):
        mark_cached(tmp_path, name)
    assert {m for _, m in _findings(graphfix(".", cwd=tmp_path))} == {"CACHED"}  # all hits
    # the step now cuts the carried graph: both importers lose GF101, other.py is still a hit
    (tmp_path / "steps.py").write_text(_step_program("cut-inside-step")[0])
    assert _findings(graphfix(".", cwd=tmp_path)) == [("other.py", "CACHED")]
    # no backward in steps.py at all: the pre-filter does not analyse the importers
    (tmp_path / "steps.py").write_text(_step_program("carried")[0].replace("loss.backward()", "loss.detach()"))
    assert _findings(graphfix(".", cwd=tmp_path)) == [("other.py", "CACHED")]
    # and back: the pre-filter's decision depended on steps.py, so both are analysed again
    (tmp_path / "steps.py").write_text(_step_program("carried")[0])
    found = _findings(graphfix(".", cwd=tmp_path))
    assert [c for c, _ in found] == ["other.py", "train.py", "train2.py"] and found[1][1] != "CACHED" != found[2][1]


def test_a_module_that_was_absent_appears(tmp_path, tmp_path_factory):
    _step_project(tmp_path, "carried")
    later = tmp_path_factory.mktemp("later") / "steps.py"
    shutil.move(tmp_path / "steps.py", later)
    age(*tmp_path.iterdir(), tmp_path)
    assert [c for c, _ in _findings(graphfix(".", cwd=tmp_path))] == ["other.py"]
    mark_cached(tmp_path, "other.py")
    shutil.move(later, tmp_path / "steps.py")
    found = _findings(graphfix(".", cwd=tmp_path))
    assert found[0] == ("other.py", "CACHED") and [c for c, _ in found[1:]] == ["train.py", "train2.py"]


def test_a_package_reexport_that_changes(tmp_path):
    train = _project(tmp_path, "package-reexport", MODEL)
    (train.parent / "train2.py").write_text(train.read_text())
    (train.parent / "nets" / "plain.py").write_text(SEPARATE)
    (tmp_path / "other.py").write_text(BUGGY)
    age(*tmp_path.rglob("*"), tmp_path)
    assert [c for c, _ in _findings(graphfix(".", cwd=tmp_path))] == ["other.py", "train.py", "train2.py"]
    mark_cached(tmp_path, "other.py")
    init = train.parent / "nets" / "__init__.py"
    init.write_text("from .plain import ActorCritic\n")  # the same name, now the class without a shared trunk
    os.utime(init, (1, 1))  # the same size as before and an old mtime: only the digest tells
    assert _findings(graphfix(".", cwd=tmp_path)) == [("other.py", "CACHED")]
    init.write_text("from .core import ActorCritic\n")
    assert [c for c, _ in _findings(graphfix(".", cwd=tmp_path))] == ["other.py", "train.py", "train2.py"]


def test_a_git_boundary_that_appears_or_goes(tmp_path):
    """``from models import ...`` in pkg/ finds models.py one package level up, unless pkg/ is a
    repository of its own (imports never resolve outside the file's project)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    train = _project(tmp_path, "from-module", MODEL)
    train.rename(pkg / "train.py")
    (pkg / "train2.py").write_text((pkg / "train.py").read_text())
    (tmp_path / "other.py").write_text(BUGGY)
    (pkg / ".git").mkdir()
    age(*tmp_path.rglob("*"), tmp_path)
    cache = tmp_path / ".graphfix_cache"
    assert [c for c, _ in _findings(graphfix("--cache-dir", str(cache), ".", cwd=tmp_path))] == ["other.py"]
    entry = index(tmp_path)[str(pkg / "train2.py")][0]
    assert entry[str(pkg / ".git")] == ["bound", str(pkg)]  # recorded for the second importer too
    mark_cached(tmp_path, "other.py")
    (pkg / ".git").rmdir()
    found = _findings(graphfix("--cache-dir", str(cache), ".", cwd=tmp_path))
    assert found[0] == ("other.py", "CACHED") and [c for c, _ in found[1:]] == ["train.py", "train2.py"]
    (pkg / ".git").write_text("gitdir: elsewhere\n")  # a worktree's .git is a file
    assert _findings(graphfix("--cache-dir", str(cache), ".", cwd=tmp_path)) == [("other.py", "CACHED")]


def test_config_changes_invalidate_only_the_files_they_configure(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    for folder in (tmp_path, sub):
        (folder / "train.py").write_text(BUGGY)
    age(*tmp_path.rglob("*"), tmp_path)
    assert len(_findings(graphfix(".", cwd=tmp_path))) == 2
    mark_cached(tmp_path, "train.py")
    assert {m for _, m in _findings(graphfix(".", cwd=tmp_path))} == {"CACHED"}
    (sub / "pyproject.toml").write_text('[tool.graphfix]\nignore = ["GF301"]\n')
    assert _findings(graphfix(".", cwd=tmp_path)) == [("train.py", "CACHED")]  # the top one, still a hit
    (sub / "pyproject.toml").write_text('[tool.graphfix]\n[tool.graphfix.per-file-ignores]\n"other_*.py" = ["GF301"]\n')
    # that config no longer turns GF301 off for sub/train.py: its settings are the first run's
    # again, and so is its (still valid) entry
    assert _findings(graphfix(".", cwd=tmp_path)) == [("train.py", "CACHED")] * 2
    (sub / "pyproject.toml").write_text('[tool.graphfix]\n[tool.graphfix.per-file-ignores]\n"train.py" = ["GF301"]\n')
    assert _findings(graphfix(".", cwd=tmp_path)) == [("train.py", "CACHED")]


def test_batch_repositories_each_keyed_by_their_own_root(tmp_path):
    repos = tmp_path / "repos"
    for name in ("a", "b"):
        (repos / name).mkdir(parents=True)
        _step_project(repos / name, "carried")
    age(*tmp_path.rglob("*"), tmp_path)
    cold = graphfix("--repos-in", "repos", cwd=tmp_path)
    assert cold.stdout.count(b"GF101") == 4 and cold.stdout.count(b"GF301") == 2
    assert len(list(tmp_path.glob(".graphfix_cache/*/*.json"))) == 2  # one index per repository root
    warm = graphfix("--repos-in", "repos", cwd=tmp_path)
    assert (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout)
    (repos / "a" / "steps.py").write_text(_step_program("cut-inside-step")[0])
    out = graphfix("--repos-in", "repos", cwd=tmp_path).stdout
    assert out.count(b"GF101") == 2 and out.count(b"GF301") == 2
    # the same files as one plain run: another project root, another index, the same answers
    plain = graphfix("repos", cwd=tmp_path).stdout
    assert plain.count(b"GF101") == 2 and plain.count(b"GF301") == 2


def test_notebooks_a_notebooks_helper_module_and_fix(tmp_path):
    """A notebook is cached as a file is; its cells' imports are dependencies too; ``--fix``
    rewrites it (fixed text is never cached) and the next check analyses what was written."""
    from tests.test_notebooks import notebook

    setup, loop = _step_program("carried")
    (tmp_path / "steps.py").write_text(setup)
    (tmp_path / "train.ipynb").write_text(notebook(["import torch\nfrom steps import train_step, sequence, targets\n", loop]))
    (tmp_path / "acc.ipynb").write_text(notebook([BUGGY]))
    age(*tmp_path.iterdir(), tmp_path)
    assert [c for c, _ in _findings(graphfix(".", cwd=tmp_path))] == ["acc.ipynb", "train.ipynb"]
    mark_cached(tmp_path, "acc.ipynb")
    mark_cached(tmp_path, "train.ipynb")
    assert {m for _, m in _findings(graphfix(".", cwd=tmp_path))} == {"CACHED"}
    (tmp_path / "steps.py").write_text(_step_program("cut-inside-step")[0])
    assert _findings(graphfix(".", cwd=tmp_path)) == [("acc.ipynb", "CACHED")]
    fixed = graphfix("--fix", "acc.ipynb", cwd=tmp_path)  # its cached result has a fix to apply: analysed
    assert fixed.returncode == 0 and b"loss.item()" in (tmp_path / "acc.ipynb").read_bytes()
    assert _findings(graphfix(".", cwd=tmp_path)) == []


def test_standard_input_is_never_cached(tmp_path):
    import subprocess
    import sys

    from tests.test_cache import ROOT

    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-m", "fixer", "-", "--stdin-filename", "train.py"], input=BUGGY.encode(), cwd=tmp_path,
            capture_output=True, env={k: v for k, v in os.environ.items() if k != "GRAPHFIX_NO_CACHE"} | {"PYTHONPATH": str(ROOT)},
        )
        assert out.returncode == 1 and b"GF301" in out.stdout
    assert not (tmp_path / ".graphfix_cache").exists()


def test_a_missing_name_is_rechecked_when_its_folder_changes(tmp_path):
    """Absence is recorded as the folder's listing plus the names looked for: another file added
    there (an editor's atomic save, a new module) costs one look per name, not the entry."""
    from fixer import depends

    (tmp_path / "pkg").mkdir()
    age(tmp_path / "pkg", tmp_path)
    with depends.collect() as found:
        assert not depends.exists(str(tmp_path / "steps.py"))
        assert not depends.exists(str(tmp_path / "pkg" / "nets" / "__init__.py"))  # nets/ is missing too
        assert not depends.exists(str(tmp_path / "nets.py"))
    depends.forget()
    top, pkg = found[str(tmp_path)], found[str(tmp_path / "pkg")]  # each name under its nearest existing folder
    assert (top[2], pkg[2]) == (("nets.py", "steps.py"), ("nets",))
    assert depends.unchanged(str(tmp_path), top) == (True, top)
    (tmp_path / "other.py").write_text("")
    age(tmp_path)
    same, now = depends.unchanged(str(tmp_path), top)
    assert same and now != top and now[2] == top[2]  # the new listing, kept from now on
    (tmp_path / "pkg" / "x.py").write_text("")
    assert depends.unchanged(str(tmp_path / "pkg"), pkg)[0] is True
    (tmp_path / "pkg" / "nets").mkdir()  # nets/__init__.py may follow: the first missing name decides
    assert depends.unchanged(str(tmp_path / "pkg"), pkg)[0] is False
    (tmp_path / "nets.py").mkdir()  # not a module, but there: any entry of that name counts
    assert depends.unchanged(str(tmp_path), now)[0] is False


PENALTY_HELPER = '''import torch


def gradient_penalty(critic, points):
    points = points.clone().requires_grad_()
    grads = torch.autograd.grad(critic(points).sum(), points)[0]
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()
'''
PENALTY_CALLER = '''import torch
from penalty import gradient_penalty

critic = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(critic.parameters(), lr=0.1)
for step in range(3):
    real = torch.randn(4, 3)
    loss = -critic(real).mean() + 10 * gradient_penalty(critic, real)
    opt.zero_grad()
    loss.backward()
    opt.step()
'''


def test_a_caller_in_another_file_that_appears_changes_or_goes(tmp_path):
    """GF107 on a helper whose penalty is backpropagated only by an importing file: the helper's
    entry depends on its folder's Python files and on each caller it read."""
    (tmp_path / "penalty.py").write_text(PENALTY_HELPER)
    age(*tmp_path.iterdir(), tmp_path)
    assert _findings(graphfix(".", cwd=tmp_path)) == []  # nobody backpropagates the penalty
    (tmp_path / "train.py").write_text(PENALTY_CALLER)
    age(*tmp_path.iterdir(), tmp_path)
    found = _findings(graphfix(".", cwd=tmp_path))
    assert [c for c, _ in found] == ["penalty.py"] and found[0][1] != "CACHED"
    mark_cached(tmp_path, "penalty.py")
    assert _findings(graphfix(".", cwd=tmp_path)) == [("penalty.py", "CACHED")]  # nothing changed: a hit
    # the caller now logs the penalty only: the helper is analysed again and is silent
    (tmp_path / "train.py").write_text(PENALTY_CALLER.replace("+ 10 * gradient_penalty(critic, real)", "\n    print(gradient_penalty(critic, real).item())"))
    assert _findings(graphfix(".", cwd=tmp_path)) == []
    (tmp_path / "train.py").unlink()
    age(tmp_path)
    assert _findings(graphfix(".", cwd=tmp_path)) == []
