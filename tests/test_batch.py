"""Batch runs over many repositories: each its own project, results and reports per repository,
a patch per repository that git applies, a branch per clean repository made without running
anything the repository configures, progress only on a terminal."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_discovery import BUGGY, CLEAN, FIXED, ROOT, git, graphfix, write

IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
NOTEBOOK = json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                  "source": BUGGY.splitlines(keepends=True)}],
                       "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}, indent=1)


def repos(tmp_path: Path, commit: bool = True) -> Path:
    """repos/a (two buggy files, one in a notebook), repos/b (clean), repos/c (a config ignoring GF301)."""
    top = tmp_path / "repos"
    write(top, {"a/train.py": BUGGY, "a/pkg/loop.py": BUGGY, "a/nb.ipynb": NOTEBOOK, "b/ok.py": CLEAN,
                "c/pyproject.toml": '[tool.graphfix]\nignore = ["GF301"]\n', "c/train.py": BUGGY})
    if commit:
        for name in ("a", "b", "c"):
            git("init", "-q", "-b", "main", cwd=top / name)
            git("add", ".", cwd=top / name)
            git("commit", "-qm", "start", cwd=top / name)
    return top


def test_repositories_from_a_folder_a_list_and_paths_are_grouped(tmp_path):
    top = repos(tmp_path, commit=False)
    out = graphfix("--repos-in", "repos", cwd=tmp_path)
    assert out.returncode == 1, out
    lines = out.stdout.decode().splitlines()
    assert lines[0] == "== repos/a: 3 finding(s) in 3 file(s)", lines
    assert all(line.startswith("repos/a/") for line in lines[1:]) and len(lines) == 4
    assert b"in 3 repositories" in out.stderr
    (tmp_path / "list.txt").write_text("# the batch\nrepos/c\n\nrepos/a  # again below\nrepos/a\n")
    listed = graphfix("--repos-from", "list.txt", "repos/b", cwd=tmp_path)
    assert listed.stdout == out.stdout and b"in 3 repositories" in listed.stderr
    assert graphfix("--repos-in", "nowhere", cwd=tmp_path).returncode == 2
    assert top.exists()


def test_report_per_repository_in_json_and_markdown(tmp_path):
    repos(tmp_path, commit=False)
    (tmp_path / "repos/b/broken.py").write_text("def f(:\n    loss.backward()\n")
    out = graphfix("--repos-in", "repos", "--report", "r.json", "--patch-dir", "patches", cwd=tmp_path)
    assert out.returncode == 123, out  # a file could not be parsed
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["mode"] == "patch" and data["repositories_count"] == 3 and data["findings"] == 3
    a, b, c = data["repositories"]
    assert a["by_rule"] == {"GF301 loss-accumulated-with-graph": 3} and a["safe_fixes"] == 3 and a["fixes_applied"] == 3
    assert sorted(a["files_changed"]) == ["nb.ipynb", "pkg/loop.py", "train.py"] and a["outcome"] == ["patch a.patch"]
    assert b["findings"] == 0 and len(b["errors"]) == 1 and "broken.py: cannot parse" in b["errors"][0]
    assert c["findings"] == 0 and c["files"] == 1 and c["outcome"] == []
    assert all(r["seconds"] >= 0 for r in data["repositories"])
    graphfix("--repos-in", "repos", "--report", "r.md", cwd=tmp_path)
    text = (tmp_path / "r.md").read_text()
    assert "| repos/a | 3 | 3 | 3 | 0 | 0 | 0 | 0 |" in text and "## repos/b" in text and "| GF301 loss-accumulated-with-graph | 3 |" in text
    assert graphfix("--repos-in", "repos", "--report", "r.txt", cwd=tmp_path).returncode == 2


def test_patches_apply_with_git_in_every_repository(tmp_path):
    top = repos(tmp_path)
    (top / "a/pkg/loop.py").write_bytes(BUGGY.replace("\n", "\r\n").encode())  # CRLF is kept
    git("commit", "-qam", "crlf", cwd=top / "a")
    out = graphfix("--patch-dir", "patches", "--repos-in", "repos", cwd=tmp_path)
    assert out.returncode == 1, out
    assert sorted(os.listdir(tmp_path / "patches")) == ["a.patch"]
    copy = tmp_path / "copy"
    shutil.copytree(top / "a", copy)
    patch = str(tmp_path / "patches/a.patch")
    assert subprocess.run(["git", "apply", "--check", patch], cwd=copy).returncode == 0
    subprocess.run(["git", "apply", patch], cwd=copy, check=True)
    assert (top / "a/train.py").read_text() == BUGGY  # a patch writes nothing to the repository
    graphfix("--fix", "repos/a", cwd=tmp_path)
    for name in ("train.py", "pkg/loop.py", "nb.ipynb"):
        assert (copy / name).read_bytes() == (top / "a" / name).read_bytes(), name
    assert (copy / "train.py").read_text() == FIXED


def test_branch_commits_the_fixes_of_clean_repositories_beside_the_checkout(tmp_path):
    top = repos(tmp_path)
    (top / "c/pyproject.toml").write_text("")  # c: dirty (and its bug no longer ignored)
    out = graphfix("--branch", "graphfix/fixes", "--repos-in", "repos", "--report", "r.json", cwd=tmp_path, env=IDENTITY)
    assert out.returncode == 1, out
    assert b"repos/c: skipped: the working tree is not clean (1 changed or untracked path(s), e.g. pyproject.toml)" in out.stderr
    a = top / "a"
    assert git("branch", "--show-current", cwd=a).strip() == "main" and git("status", "--porcelain", cwd=a) == ""
    assert (a / "train.py").read_text() == BUGGY  # the checkout is not touched
    assert git("show", "graphfix/fixes:train.py", cwd=a) == FIXED
    assert git("diff", "--name-only", "main", "graphfix/fixes", cwd=a).split() == ["nb.ipynb", "pkg/loop.py", "train.py"]
    message = git("log", "-1", "--format=%B", "graphfix/fixes", cwd=a)
    assert "Fix 3 autograd graph-lifetime finding(s)" in message and "- train.py:" in message and "GF301 [*]" in message
    assert "graphfix/fixes" not in git("branch", cwd=top / "b") and "graphfix/fixes" not in git("branch", cwd=top / "c")
    outcomes = [r["outcome"] for r in json.loads((tmp_path / "r.json").read_text())["repositories"]]
    assert outcomes[0][0].startswith("branch graphfix/fixes (") and outcomes[1] == [] and outcomes[2][0].startswith("skipped")
    again = graphfix("--branch", "graphfix/fixes", "repos/a", cwd=tmp_path, env=IDENTITY)
    assert b"already exists" in again.stderr
    assert graphfix("--branch", "bad..name", "repos/a", cwd=tmp_path).returncode == 2
    assert graphfix("--branch", "x", "--fix", "repos/a", cwd=tmp_path).returncode == 2


def test_branch_without_a_git_identity_commits_as_graphfix(tmp_path):
    """A fresh machine or CI image has no git identity: the branch is still made, its commit
    names graphfix, and the message says so; a configured identity is used as it is."""
    top = repos(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    bare = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "EMAIL"))}
    env = {**bare, "HOME": str(home), "XDG_CONFIG_HOME": str(home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "fixer", "--branch", "fixes", "repos/a"], cwd=tmp_path, env=env, capture_output=True, timeout=60)
    assert done.returncode == 1 and b"branch fixes (" in done.stderr, done.stderr
    assert b"committed as graphfix <graphfix@localhost> (no git identity configured)" in done.stderr
    assert b"identity unknown" not in done.stderr
    assert git("log", "-1", "--format=%an <%ae> / %cn <%ce>", "fixes", cwd=top / "a").strip() == "graphfix <graphfix@localhost> / graphfix <graphfix@localhost>"
    out = graphfix("--branch", "mine", "repos/a", cwd=tmp_path, env=IDENTITY)
    assert b"committed as graphfix" not in out.stderr
    assert git("log", "-1", "--format=%an <%ae>", "mine", cwd=top / "a").strip() == "t <t@t>"


@pytest.mark.parametrize("change", ["modified", "staged", "untracked"])
def test_branch_is_never_made_on_a_dirty_tree(tmp_path, change):
    top = repos(tmp_path)
    a = top / "a"
    if change == "untracked":
        (a / "notes.txt").write_text("mine")
    else:
        (a / "pkg/loop.py").write_text(BUGGY + "# my edit\n")
        if change == "staged":
            git("add", "pkg/loop.py", cwd=a)
    out = graphfix("--branch", "fixes", "repos/a", cwd=tmp_path, env=IDENTITY)
    assert b"skipped: the working tree is not clean" in out.stderr, out
    assert "fixes" not in git("branch", cwd=a)


def test_branch_runs_nothing_the_repository_configures(tmp_path):
    top = repos(tmp_path)
    a = top / "a"
    marker = tmp_path / "MARKER"
    with open(a / ".git" / "config", "a") as config:  # a hostile checkout ships its .git folder
        config.write(
            f"[core]\n\tfsmonitor = touch {marker}; true\n\thooksPath = .git/hooks\n\tpager = touch {marker}\n"
            f"[filter \"evil\"]\n\tclean = touch {marker}; cat\n\tsmudge = touch {marker}; cat\n\tprocess = touch {marker}\n"
            f"[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = touch {marker}\n[diff \"evil\"]\n\ttextconv = touch {marker}; cat\n"
        )
    (a / ".git" / "info").mkdir(exist_ok=True)
    (a / ".git" / "info" / "attributes").write_text("* filter=evil diff=evil\n")
    for hook in ("fsmonitor-watchman", "post-index-change", "pre-commit", "commit-msg", "post-commit", "reference-transaction", "post-checkout"):
        (a / ".git" / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (a / ".git" / "hooks" / hook).chmod(0o755)
    os.utime(a / "train.py", (1, 1))  # stale stat data: git would re-read (and filter) the file
    out = graphfix("--branch", "fixes", "repos/a", cwd=tmp_path, env=IDENTITY)
    assert out.returncode == 1 and b"branch fixes (" in out.stderr, out
    assert not marker.exists()
    listing = subprocess.run(["git", "-c", "core.fsmonitor=false", "ls-tree", "-r", "--name-only", "fixes"], cwd=a, capture_output=True, text=True)
    assert listing.stdout.split() == ["nb.ipynb", "pkg/loop.py", "train.py"]


def on_a_terminal(args: list[str], cwd: Path) -> tuple[int, bytes]:
    """Run graphfix with stderr on a pseudo-terminal: (exit code, what the terminal received)."""
    main, other = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", "TERM": "xterm"}
    done = subprocess.run([sys.executable, "-m", "fixer", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=other, timeout=60)
    os.close(other)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the other side is closed and everything was read
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    return done.returncode, shown


def test_progress_only_on_a_terminal(tmp_path):
    repos(tmp_path, commit=False)
    piped = graphfix("--repos-in", "repos", cwd=tmp_path)
    assert b"\x1b" not in piped.stderr and b"repositories" in piped.stderr and b"files, " not in piped.stderr, piped.stderr
    code, shown = on_a_terminal(["--repos-in", "repos", "-j1"], tmp_path)
    assert code == 1 and b"files, " in shown and b"/3 repositories" in shown and b"finding(s)" in shown, shown
    code, shown = on_a_terminal(["--repos-in", "repos", "-j1", "--no-progress"], tmp_path)
    assert code == 1 and b"files, " not in shown and b"\x1b" not in shown and b"in 3 repositories" in shown, shown
    code, shown = on_a_terminal(["--repos-in", "repos", "-j1", "-q"], tmp_path)
    assert code == 1 and shown == b"", shown
