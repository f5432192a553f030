"""kill -9 of a batch run at random moments (as tests/test_interrupt.py does for --fix):

- ``--branch``: every repository's HEAD, index and working tree are as before, and its branch is
  either absent or complete (the fixed tree, on top of HEAD); a slow ``git`` on PATH widens the
  window in which the kill lands among the git commands.
- ``--patch-dir``: every patch is either absent or whole (the bytes of an uninterrupted run).
Set GRAPHFIX_INTERRUPT_TRIALS for a longer run."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_batch import IDENTITY
from tests.test_discovery import BUGGY, CLEAN, git
from tests.test_interrupt import wait_until_gone

ROOT = Path(__file__).resolve().parent.parent
TRIALS = int(os.environ.get("GRAPHFIX_INTERRUPT_TRIALS", "4"))
REPOS = 10
BRANCH = "graphfix/fixes"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the pool workers in /proc")


def pristine(top: Path) -> Path:
    """REPOS committed repositories, each with a buggy and a clean file."""
    for number in range(REPOS):
        repo = top / f"r{number:02}"
        (repo / "pkg").mkdir(parents=True)
        (repo / "train.py").write_text(BUGGY)
        (repo / "pkg" / "ok.py").write_text(CLEAN)
        git("init", "-q", "-b", "main", cwd=repo)
        git("add", ".", cwd=repo)
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start", cwd=repo)
    return top


def slow_git(folder: Path) -> dict:
    """An environment whose ``git`` waits a little before each command."""
    folder.mkdir()
    real = shutil.which("git")
    (folder / "git").write_text(f"#!/bin/sh\nsleep 0.05\nexec {real} \"$@\"\n")
    (folder / "git").chmod(0o755)
    return {**os.environ, **IDENTITY, "PYTHONPATH": str(ROOT), "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def start(args: list[str], cwd: Path, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "fixer", "--jobs", "2", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def state(repo: Path) -> tuple:
    """HEAD, the index file, and every working-tree file, as bytes."""
    files = {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*")) if p.is_file() and ".git" not in p.parts}
    return git("rev-parse", "HEAD", cwd=repo), (repo / ".git" / "HEAD").read_bytes(), (repo / ".git" / "index").read_bytes(), files


def branch_tree(repo: Path) -> tuple:
    """(the branch's tree, its parent), or None when there is no branch."""
    if BRANCH not in git("branch", "--list", BRANCH, cwd=repo):
        return None
    return git("rev-parse", f"{BRANCH}^{{tree}}", cwd=repo), git("rev-parse", f"{BRANCH}^", cwd=repo)


def kill(process: subprocess.Popen, trial: int, delay: float) -> None:
    time.sleep(delay)
    if trial % 2 == 0:
        os.killpg(process.pid, signal.SIGKILL)
    else:
        os.kill(process.pid, signal.SIGKILL)
    process.wait()
    wait_until_gone(process.pid)


def test_kill_9_during_branch_leaves_each_repository_as_before_or_fully_branched(tmp_path):
    template = pristine(tmp_path / "template")
    env = slow_git(tmp_path / "bin")
    reference = tmp_path / "reference"
    shutil.copytree(template, reference, symlinks=True)
    began = time.monotonic()
    assert start(["--branch", BRANCH, "--repos-in", str(reference)], tmp_path, env).wait(timeout=300) == 1
    duration = time.monotonic() - began
    trees = {repo.name: branch_tree(repo)[0] for repo in sorted(reference.iterdir())}
    assert all(trees.values())

    rng = random.Random(20261127)
    outcomes = []
    for trial in range(TRIALS):
        tree = tmp_path / f"trial{trial}"
        shutil.copytree(template, tree, symlinks=True)
        before = {repo.name: state(repo) for repo in sorted(tree.iterdir())}
        delay = rng.uniform(0.3, 0.95) * duration
        kill(start(["--branch", BRANCH, "--repos-in", str(tree)], tmp_path, env), trial, delay)
        done = 0
        for repo in sorted(tree.iterdir()):
            assert state(repo) == before[repo.name], f"trial {trial}: {repo.name} changed"
            made = branch_tree(repo)
            if made is not None:
                assert made == (trees[repo.name], before[repo.name][0]), f"trial {trial}: {repo.name}: a partial branch"
                done += 1
        subprocess.run(["git", "fsck", "--no-progress"], cwd=tree / "r00", check=True, capture_output=True)
        outcomes.append((round(delay, 2), done))
        shutil.rmtree(tree)
    print(f"\n{REPOS} repositories, full run {duration:.1f} s; (kill after s, branches made): {outcomes}")
    assert any(0 < done < REPOS for _, done in outcomes), f"no kill landed mid-run: {outcomes}"


def test_kill_9_during_patch_dir_leaves_each_patch_absent_or_whole(tmp_path):
    template = pristine(tmp_path / "template")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    began = time.monotonic()
    assert start(["--patch-dir", "reference", "--repos-in", str(template)], tmp_path, env).wait(timeout=300) == 1
    duration = time.monotonic() - began
    whole = {p.name: p.read_bytes() for p in (tmp_path / "reference").iterdir()}
    assert len(whole) == REPOS

    rng = random.Random(20261128)
    for trial in range(TRIALS):
        patches = tmp_path / f"patches{trial}"
        kill(start(["--patch-dir", patches.name, "--repos-in", str(template)], tmp_path, env), trial, rng.uniform(0.5, 1.0) * duration)
        written = {p.name: p.read_bytes() for p in patches.glob("*.patch")} if patches.exists() else {}
        torn = [name for name, data in written.items() if data != whole.get(name)]
        assert not torn, f"trial {trial}: patches neither absent nor whole: {torn}"
    assert [state(repo)[3] for repo in sorted(template.iterdir())] == [{"train.py": BUGGY.encode(), "pkg/ok.py": CLEAN.encode()}] * REPOS
