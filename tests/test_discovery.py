"""File discovery: which files are checked, and that finding them runs nothing and never blocks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fixer.discovery import discover
from fixer.source import SourceError, read_bytes

ROOT = Path(__file__).resolve().parent.parent
BUGGY = (ROOT / "fixtures/loss_accumulated_with_graph/plain_loop.before.py").read_text().replace("  # expect: GF301", "")
FIXED = (ROOT / "fixtures/loss_accumulated_with_graph/plain_loop.after.py").read_text()
CLEAN = (ROOT / "fixtures/loss_accumulated_with_graph/item_already.ok.py").read_text()


def graphfix(*args: str, cwd: Path, env: dict | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "fixer", *args], cwd=cwd, capture_output=True, env=env, timeout=30, input=stdin
    )


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def git(*args: str, cwd: Path) -> str:
    """Real git, only on benign test repositories, to know what git itself would list. Its own
    identity: a fresh machine has none, and `git commit` refuses without one."""
    return subprocess.run(["git", "-c", "core.fsmonitor=false", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def git_python_files(folder: Path) -> set[str]:
    listed = git("ls-files", "--others", "--exclude-standard", "--cached", cwd=folder).splitlines()
    return {name for name in listed if name.endswith(".py")}


def found(folder: Path, **options) -> set[str]:
    return {os.path.relpath(path, folder).replace(os.sep, "/") for path in discover([str(folder)], **options).files}


# --- D6: git is never run; its ignore rules are read from the files -------------------------------


def test_git_is_never_run_and_repository_config_cannot_execute(tmp_path):
    repo = tmp_path / "p2"
    repo.mkdir()
    write(repo, {"train.py": BUGGY, ".gitignore": "ignored/\n", "ignored/t.py": BUGGY})
    git("init", "-q", cwd=repo)
    git("add", "train.py", cwd=repo)
    git("commit", "-qm", "x", cwd=repo)
    marker = tmp_path / "MARKER"
    with open(repo / ".git" / "config", "a") as config:  # a hostile checkout ships its .git folder
        config.write(f"[core]\n\tfsmonitor = touch {marker}; true\n\thooksPath = .git/hooks\n")
    for hook in ("fsmonitor-watchman", "post-index-change", "pre-commit", "post-checkout", "reference-transaction"):
        (repo / ".git" / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (repo / ".git" / "hooks" / hook).chmod(0o755)
    fake_git = tmp_path / "bin" / "git"  # any git at all: the check must not depend on git's version
    fake_git.parent.mkdir()
    fake_git.write_text(f"#!/bin/sh\ntouch {tmp_path / 'GIT_RAN'}\nexit 1\n")
    fake_git.chmod(0o755)
    for env in ({}, {"PATH": f"{fake_git.parent}{os.pathsep}{os.environ['PATH']}"}):
        for args, cwd in ((["."], repo), (["p2"], tmp_path), (["--diff", "."], repo)):
            out = graphfix(*args, cwd=cwd, env=env)
            assert out.returncode == 1 and b"ignored" not in out.stdout, out  # .gitignore still honoured
        assert not marker.exists()  # the old code ran `git ls-files`, and git ran core.fsmonitor
    assert not (tmp_path / "GIT_RAN").exists()


def test_ignore_rules_match_git_ls_files(tmp_path):
    repo = tmp_path / "repo"
    write(
        repo,
        {
            ".gitignore": "build_out/\n/top.py\nkeep*.py\n*_gen.py\n!special_gen.py\nignored_dir/\n"
            "!ignored_dir/rescued.py\ndocs/**/*.py\n# a comment\n\\#hash.py\n",
            "a.py": "", "top.py": "", "keep.py": "", "keep_me.py": "", "x_gen.py": "", "special_gen.py": "",
            "from_info.py": "", "#hash.py": "", "build_out/b.py": "", "ignored_dir/rescued.py": "",
            "ignored_dir/c.py": "", "docs/d.py": "", "docs/x/y.py": "", "docs/readme.txt": "",
            "pkg/.gitignore": "!keep.py\nlocal.py\n/anchored.py\n",
            "pkg/top.py": "", "pkg/keep.py": "", "pkg/keep_other.py": "", "pkg/local.py": "", "pkg/anchored.py": "",
            "pkg/build_out/e.py": "", "pkg/sub/anchored.py": "", "pkg/sub/local.py": "", "pkg/sub/ok.py": "",
        },
    )
    git("init", "-q", cwd=repo)
    (repo / ".git" / "info" / "exclude").write_text("from_info.py\n")
    expected = git_python_files(repo)
    assert "pkg/keep.py" in expected and "keep.py" not in expected and "pkg/top.py" in expected  # the tree tests something
    assert found(repo) == expected
    for sub in ("pkg", "pkg/sub", "docs"):  # a folder given below the root sees the rules above it
        assert found(repo / sub) == git_python_files(repo / sub), sub


def test_nested_repositories_follow_their_own_rules(tmp_path):
    outer = tmp_path / "outer"
    write(outer, {".gitignore": "*_gen.py\nvendor/\n", "a.py": "", "a_gen.py": "", "vendor/v.py": ""})
    write(outer / "inner", {".gitignore": "local.py\n", "b.py": "", "b_gen.py": "", "local.py": "", "x/local.py": ""})
    write(outer / "vendor" / "dep", {"d.py": ""})
    for folder in (outer, outer / "inner", outer / "vendor" / "dep"):
        git("init", "-q", cwd=folder)
    inner = {f"inner/{name}" for name in git_python_files(outer / "inner")}
    assert inner == {"inner/b.py", "inner/b_gen.py"}  # the outer *_gen.py does not reach into inner
    # git lists a nested repository as "inner/" and stops; every repository's own listing is the truth
    assert found(outer) == git_python_files(outer) | inner
    # from a folder that is not a repository (several checkouts side by side), the same rules
    assert found(tmp_path) == {f"outer/{name}" for name in git_python_files(outer) | inner}


def test_gitignore_outside_a_repository_is_not_applied(tmp_path):
    write(tmp_path, {".gitignore": "stray.py\n", "stray.py": "", "sub/.gitignore": "*.py\n", "sub/s.py": ""})
    assert found(tmp_path) == {"stray.py", "sub/s.py"}


def test_folder_named_explicitly_inside_an_ignored_folder_is_walked(tmp_path):
    write(tmp_path, {".gitignore": "ignored/\n*_gen.py\n", "ignored/sub/t.py": BUGGY, "ignored/sub/t_gen.py": BUGGY})
    git("init", "-q", cwd=tmp_path)
    assert found(tmp_path) == set()
    assert found(tmp_path / "ignored") == {"sub/t.py"}  # the other patterns still apply inside it
    out = graphfix("ignored/sub", cwd=tmp_path)
    assert out.returncode == 1 and out.stdout.count(b"GF301") == 1, out.stderr


def test_no_respect_gitignore_checks_ignored_files(tmp_path):
    write(tmp_path, {".gitignore": "gen/\n", "gen/g.py": "", "a.py": ""})
    git("init", "-q", cwd=tmp_path)
    assert found(tmp_path) == {"a.py"}
    assert found(tmp_path, respect_gitignore=False) == {"a.py", "gen/g.py"}


# --- D12: nothing that could block is opened --------------------------------------------------------


def special_files(folder: Path) -> None:
    """A FIFO, a socket and a device, each named like a Python file."""
    os.mkfifo(folder / "fifo.py")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "sock.py"))
    sock.close()
    (folder / "dev.py").symlink_to("/dev/zero")


def test_fifo_socket_and_device_are_skipped_in_a_walk(tmp_path):
    write(tmp_path, {"d/train.py": BUGGY})
    special_files(tmp_path / "d")
    out = graphfix("--fix", "d", cwd=tmp_path)  # the old code hung here, opening the FIFO
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "d" / "train.py").read_text() == FIXED
    assert b"1 file(s) scanned" in out.stderr


def test_fifo_named_explicitly_is_an_error_and_the_run_goes_on(tmp_path):
    write(tmp_path, {"d/train.py": BUGGY})
    special_files(tmp_path / "d")
    out = graphfix("d/fifo.py", "d/sock.py", "d/dev.py", "d/train.py", cwd=tmp_path)
    assert out.returncode == 123
    errors = out.stderr.decode().splitlines()
    for name in ("fifo", "sock", "dev"):
        assert f"d/{name}.py: error: not a regular file" in errors
    assert out.stdout.count(b"GF301") == 1


@pytest.fixture
def no_hang():
    """Fail instead of hanging (the old read_bytes blocked forever opening a FIFO)."""

    def timeout(signum, frame):
        raise TimeoutError("blocked")

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_read_bytes_refuses_a_fifo_without_blocking(tmp_path, no_hang):
    special_files(tmp_path)
    for name in ("fifo.py", "sock.py", "dev.py"):
        with pytest.raises(SourceError, match="^cannot read: not a regular file$"):
            read_bytes(str(tmp_path / name))
    (tmp_path / "ok.py").write_bytes(b"x = 1\n")
    assert read_bytes(str(tmp_path / "ok.py")) == b"x = 1\n"


# --- D13: a path that cannot be used is one error line, not the end of the run ----------------------


def test_unusable_explicit_paths_are_reported_and_the_rest_processed(tmp_path):
    write(tmp_path, {"train.py": BUGGY})
    (tmp_path / "broken.py").symlink_to("nowhere.py")
    (tmp_path / "loop.py").symlink_to("loop.py")
    out = graphfix("nope.py", "broken.py", "loop.py", "train.py", cwd=tmp_path)
    assert out.returncode == 123
    errors = out.stderr.decode().splitlines()
    assert "nope.py: error: no such file or directory" in errors
    assert "broken.py: error: no such file or directory" in errors
    assert "loop.py: error: too many levels of symbolic links" in errors
    assert out.stdout.count(b"GF301") == 1  # train.py, named last, was still checked
    assert "3 error(s)" in errors[-1] and "Traceback" not in out.stderr.decode()


# --- D4: links out of the tree are not followed; a file is checked once ------------------------------


def test_symlink_pointing_outside_the_folder_is_skipped_with_a_warning(tmp_path):
    write(tmp_path, {"outside/victim.py": BUGGY, "outside/pkg/p.py": BUGGY, "target/clean.py": CLEAN})
    (tmp_path / "target" / "link.py").symlink_to("../outside/victim.py")
    (tmp_path / "target" / "linkdir").symlink_to("../outside/pkg")
    out = graphfix("--fix", "target", cwd=tmp_path)
    assert out.returncode == 0, out.stderr  # a warning alone keeps exit 0
    assert "target/link.py: warning: symlink points outside target; skipped" in out.stderr.decode().splitlines()
    assert (tmp_path / "outside" / "victim.py").read_text() == BUGGY
    assert (tmp_path / "outside" / "pkg" / "p.py").read_text() == BUGGY
    assert (tmp_path / "target" / "link.py").is_symlink()


def test_a_file_and_a_link_to_it_are_checked_once(tmp_path):
    write(tmp_path, {"t/a_link_sorts_first.py": "", "t/real.py": BUGGY, "t/sub/deep.py": CLEAN})
    (tmp_path / "t" / "a_link_sorts_first.py").unlink()
    (tmp_path / "t" / "a_link_sorts_first.py").symlink_to("real.py")
    (tmp_path / "t" / "sub" / "up.py").symlink_to("../real.py")
    assert found(tmp_path / "t") == {"real.py", "sub/deep.py"}  # the file's own name is kept
    out = graphfix("t", "t/real.py", cwd=tmp_path)
    assert out.stdout.count(b"GF301") == 1, out.stdout
    assert b"2 file(s) scanned" in out.stderr


# --- --exclude: gitignore-style patterns on the path below the folder given -----------------------


def test_exclude_patterns_match_paths_relative_to_the_given_folder(tmp_path):
    write(tmp_path, {"gen/leak_gen.py": "", "gen/sub/s.py": "", "pkg/gen/p.py": "", "pkg/m.py": "", "top.py": ""})
    everything = {"gen/leak_gen.py", "gen/sub/s.py", "pkg/gen/p.py", "pkg/m.py", "top.py"}
    cases = {
        "gen/*": everything - {"gen/leak_gen.py", "gen/sub/s.py"},
        "gen/*.py": everything - {"gen/leak_gen.py"},
        "gen/leak_gen.py": everything - {"gen/leak_gen.py"},
        "*/leak_gen.py": everything - {"gen/leak_gen.py"},
        "gen": everything - {"gen/leak_gen.py", "gen/sub/s.py", "pkg/gen/p.py"},  # a bare name: any depth
        "/gen": everything - {"gen/leak_gen.py", "gen/sub/s.py"},
        "m.py": everything - {"pkg/m.py"},
    }
    for pattern, expected in cases.items():
        assert found(tmp_path, exclude=[pattern]) == expected, pattern
    assert found(tmp_path / "pkg", exclude=["gen/*"]) == {"m.py"}  # relative to the folder given
    write(tmp_path, {"pyproject.toml": '[tool.graphfix]\nexclude = ["gen/*.py"]\n', "gen/leak_gen.py": BUGGY})
    assert graphfix(".", cwd=tmp_path).returncode == 0
    assert graphfix("--exclude", "pkg", "gen/leak_gen.py", cwd=tmp_path).returncode == 1  # named: checked
