"""Batch mode under the hostile review of 2026-11-27 (B1, B3-B6, B8): a ``.git`` file naming
another repository gets no branch there; the commit's markers follow its legend; a repository
list takes ``proj#1`` as a name and a symlink as the folder it names; bad output paths are
rejected before the batch runs; a patch left by an earlier run is named."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.test_batch import IDENTITY, repos
from tests.test_discovery import BUGGY, CLEAN, FIXED, git, graphfix, write

UNSAFE = (Path(__file__).resolve().parent.parent / "fixtures/repeated_backward").glob("*.before.py")


def test_a_git_file_naming_another_repository_gets_no_branch_there(tmp_path):
    top = repos(tmp_path)
    other = top / "a"
    copy = tmp_path / "set" / "gitfile"
    copy.mkdir(parents=True)
    shutil.copy(other / "train.py", copy / "train.py")
    (copy / ".git").write_text(f"gitdir: {other / '.git'}\n")
    out = graphfix("--branch", "graphfix/fixes", "set/gitfile", cwd=tmp_path, env=IDENTITY)
    assert b"skipped: its .git file names" in out.stderr, out
    assert "graphfix/fixes" not in git("branch", cwd=other)


def test_a_linked_worktree_still_gets_its_branch(tmp_path):
    top = repos(tmp_path)
    git("worktree", "add", "-q", str(tmp_path / "linked"), cwd=top / "a")
    out = graphfix("--branch", "graphfix/fixes", "linked", cwd=tmp_path, env=IDENTITY)
    assert b"linked: branch graphfix/fixes (" in out.stderr, out
    assert "graphfix/fixes" in git("branch", cwd=top / "a")


def test_commit_marks_an_unsafe_fix_as_unsafe(tmp_path):
    source = next(iter(sorted(UNSAFE))).read_text()
    source = "\n".join(line.split("  # expect:")[0] for line in source.splitlines()) + "\n"
    write(tmp_path, {"r/train.py": source})
    git("init", "-q", "-b", "main", cwd=tmp_path / "r")
    git("add", ".", cwd=tmp_path / "r")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start", cwd=tmp_path / "r")
    out = graphfix("--unsafe-fixes", "--branch", "fixes", "r", cwd=tmp_path, env=IDENTITY)
    assert b"branch fixes (" in out.stderr, out
    found = int(out.stderr.split(b"graphfix: ")[-1].split(b" finding(s)")[0])
    assert f"{found} finding(s) ({found} fixable with --fix)".encode() in out.stderr, out.stderr  # all were committed
    message = git("log", "-1", "--format=%B", "fixes", cwd=tmp_path / "r")
    findings = [line for line in message.splitlines() if line.startswith("- ")]
    assert findings and all(" [-] " in line for line in findings), message


def test_repository_list_keeps_a_hash_inside_a_name_and_merges_a_symlink(tmp_path):
    write(tmp_path, {"proj#1/train.py": BUGGY, "proj/ok.py": "x = 1\n"})
    os.symlink(tmp_path / "proj#1", tmp_path / "link")
    (tmp_path / "list.txt").write_text("proj#1   # the first\n# a comment\nlink\n")
    out = graphfix("--repos-from", "list.txt", cwd=tmp_path)
    assert out.returncode == 1, out
    assert out.stdout.decode().splitlines()[0].startswith("== proj#1: 1 finding(s)"), out.stdout
    assert b"in 1 repositories" in out.stderr or b"in 1 repository" in out.stderr, out.stderr


def test_bad_output_paths_are_rejected_before_the_batch_runs(tmp_path):
    repos(tmp_path, commit=False)
    (tmp_path / "file").write_text("")
    for args in (["--patch-dir", "file"], ["--report", "missing/r.json"]):
        out = graphfix("--repos-in", "repos", *args, cwd=tmp_path)
        assert out.returncode == 2, out
        assert out.stdout == b"", "the batch ran before the option was refused"


def test_a_patch_left_by_an_earlier_run_is_named(tmp_path):
    top = repos(tmp_path)
    assert graphfix("--patch-dir", "patches", "--repos-in", "repos", cwd=tmp_path).returncode == 1
    (top / "a" / "train.py").write_text(CLEAN)
    shutil.rmtree(top / "a" / "pkg")
    (top / "a" / "nb.ipynb").unlink()
    out = graphfix("--patch-dir", "patches", "--repos-in", "repos", cwd=tmp_path)
    assert b"a.patch is left from an earlier run, not written by this one" in out.stderr, out


def test_a_repository_checked_out_with_crlf_line_endings_gets_its_branch(tmp_path):
    top = repos(tmp_path)
    a = top / "a"
    (a / ".gitattributes").write_text("*.py text eol=crlf\n")
    git("add", ".gitattributes", cwd=a)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "crlf", cwd=a)
    for name in ("train.py", "pkg/loop.py"):
        (a / name).unlink()
    git("checkout", "--", ".", cwd=a)
    assert (a / "train.py").read_bytes().count(b"\r\n") > 0 and git("status", "--porcelain", cwd=a) == ""
    out = graphfix("--branch", "fixes", "repos/a", cwd=tmp_path, env=IDENTITY)
    assert b"repos/a: branch fixes (" in out.stderr, out
    assert git("show", "fixes:train.py", cwd=a) == FIXED  # stored as git stores it: LF


def test_files_of_a_submodule_are_not_called_untracked(tmp_path):
    write(tmp_path, {"sub/loop.py": BUGGY, "super/train.py": BUGGY})
    for name in ("sub", "super"):
        git("init", "-q", "-b", "main", cwd=tmp_path / name)
        git("add", ".", cwd=tmp_path / name)
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start", cwd=tmp_path / name)
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(tmp_path / "sub"), "sub", cwd=tmp_path / "super")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "sub", cwd=tmp_path / "super")
    out = graphfix("--branch", "fixes", "super", cwd=tmp_path, env=IDENTITY)
    assert b": 1 file(s); 1 file(s) of a submodule left out" in out.stderr, out
    assert b"untracked" not in out.stderr
