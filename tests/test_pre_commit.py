"""`.pre-commit-hooks.yaml` works with the real pre-commit: `pre-commit try-repo` installs graphfix
from a copy of this repository and runs the check hook and the fix hook on a throwaway project."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli import BUGGY, FIXED, ROOT

PRE_COMMIT = shutil.which("pre-commit") or (shutil.which("pre-commit", path=str(Path(sys.executable).parent)))
pytestmark = pytest.mark.skipif(
    PRE_COMMIT is None, reason="pre-commit is not installed (`pip install pre-commit`; .ci/run installs it)"
)
SHIPPED = ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml", "fixer", "codemods")


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory) -> Path:
    """This repository's installable part, committed into a repository of its own."""
    repo = tmp_path_factory.mktemp("graphfix-hooks")
    for name in SHIPPED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, repo / name)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "hooks", cwd=repo)
    return repo


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")  # pre-commit's cache of installed hooks


def try_repo(hooks_repo: Path, home: Path, hook: str, project: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home)}
    env.pop("PYTHONPATH", None)  # the hook runs the graphfix pre-commit installed, not this checkout
    return subprocess.run(
        [PRE_COMMIT, "try-repo", str(hooks_repo), hook, "--all-files"],
        cwd=project, env=env, capture_output=True, text=True, timeout=900,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(BUGGY)
    (tmp_path / "notes.txt").write_text("loss.backward()\n")  # not Python: never passed to the hook
    git("init", "-q", cwd=tmp_path)
    git("add", "-A", cwd=tmp_path)
    return tmp_path


def test_check_hook_fails_on_a_finding_and_passes_on_clean_code(hooks_repo, pre_commit_home, project):
    out = try_repo(hooks_repo, pre_commit_home, "graphfix", project)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "train.py:15:5: GF301" in out.stdout and "notes.txt" not in out.stdout
    assert (project / "train.py").read_text() == BUGGY
    (project / "train.py").write_text(FIXED)
    git("add", "-A", cwd=project)
    clean = try_repo(hooks_repo, pre_commit_home, "graphfix", project)
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_fix_hook_fixes_the_file_and_fails_as_pre_commit_does_on_modified_files(hooks_repo, pre_commit_home, project):
    out = try_repo(hooks_repo, pre_commit_home, "graphfix-fix", project)
    assert out.returncode == 1 and "files were modified by this hook" in out.stdout, out.stdout + out.stderr
    assert (project / "train.py").read_text() == FIXED
    git("add", "-A", cwd=project)
    again = try_repo(hooks_repo, pre_commit_home, "graphfix-fix", project)
    assert again.returncode == 0, again.stdout + again.stderr


def readme_snippet() -> str:
    """The README's pre-commit block, as written."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### pre-commit"):]
    return section[section.index("```yaml\n") + 8:section.index("\n```", section.index("```yaml\n"))] + "\n"


def test_the_readme_snippet_pins_the_release_tag_and_runs_as_written(hooks_repo, pre_commit_home, project):
    snippet = readme_snippet()
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    assert re.search(rf"^  rev: v{re.escape(version)}$", snippet, re.M), snippet
    assert "<" not in snippet  # no placeholder left but the repository's URL
    git("tag", f"v{version}", cwd=hooks_repo)
    config = snippet.replace("https://YOUR-HOST/graphfix.git", str(hooks_repo))
    assert config != snippet
    (project / ".pre-commit-config.yaml").write_text("repos:\n" + config)
    (project / "vendor").mkdir()
    (project / "vendor" / "train.py").write_text(BUGGY)  # staged, but the configuration excludes it
    (project / "graphfix.toml").write_text('extend-exclude = ["vendor"]\n')
    git("add", "-A", cwd=project)
    env = {**os.environ, "PRE_COMMIT_HOME": str(pre_commit_home)}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([PRE_COMMIT, "run", "--all-files"], cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "train.py:15:5: GF301" in done.stdout and "files were modified by this hook" in done.stdout
    assert (project / "train.py").read_text() == FIXED
    assert "vendor" not in done.stdout and (project / "vendor" / "train.py").read_text() == BUGGY  # --force-exclude
