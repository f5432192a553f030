"""--force-exclude (ruff's meaning): exclude also applies to paths named explicitly, as pre-commit
names every staged file; the config key is `force-exclude`, the flag wins over it. Without it a
file named explicitly is checked even when exclude matches it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli import BUGGY, ROOT


def graphfix(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "fixer", *args], cwd=cwd, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name in ("generated/deep/train.py", "src/train.py", "notes/scratch.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(BUGGY)
    (tmp_path / "graphfix.toml").write_text('extend-exclude = ["generated", "scratch.py"]\n')
    return tmp_path


NAMED = ("generated/deep/train.py", "src/train.py", "notes/scratch.py")


def reported(done: subprocess.CompletedProcess) -> list[str]:
    return sorted({line.split(":")[0] for line in done.stdout.splitlines() if " GF301 " in line})


def test_without_force_exclude_named_files_are_checked(project):
    done = graphfix(*NAMED, cwd=project)
    assert done.returncode == 1 and reported(done) == sorted(NAMED), done


def test_force_exclude_skips_named_files_that_exclude_matches_or_lie_in_an_excluded_folder(project):
    done = graphfix("--force-exclude", *NAMED, cwd=project)
    assert done.returncode == 1 and reported(done) == ["src/train.py"], done
    only_excluded = graphfix("--force-exclude", "generated/deep/train.py", "notes/scratch.py", cwd=project)
    assert only_excluded.returncode == 0 and only_excluded.stdout == "", only_excluded
    assert "0 file(s) scanned" in only_excluded.stderr


def test_the_config_key_turns_it_on_and_the_flag_wins(project):
    (project / "graphfix.toml").write_text('extend-exclude = ["generated", "scratch.py"]\nforce-exclude = true\n')
    assert reported(graphfix(*NAMED, cwd=project)) == ["src/train.py"]
    assert reported(graphfix("--no-force-exclude", *NAMED, cwd=project)) == sorted(NAMED)
    # from a sub-folder: the config's patterns are relative to its own folder
    assert graphfix("deep/train.py", cwd=project / "generated").returncode == 0


def test_command_line_exclude_is_forced_relative_to_the_current_folder(project):
    done = graphfix("--force-exclude", "--exclude", "src", *NAMED, cwd=project)
    assert done.returncode == 0 and reported(done) == [], done


def test_an_excluded_stdin_filename_gives_the_buffer_back_unchecked(project):
    fixed = graphfix("--force-exclude", "--fix", "-", "--stdin-filename", "generated/deep/train.py", cwd=project, stdin=BUGGY)
    assert fixed.returncode == 0 and fixed.stdout == BUGGY, fixed
    checked = graphfix("--force-exclude", "-", "--stdin-filename", "src/train.py", cwd=project, stdin=BUGGY)
    assert checked.returncode == 1 and " GF301 " in checked.stdout
    plain = graphfix("--fix", "-", "--stdin-filename", "generated/deep/train.py", cwd=project, stdin=BUGGY)
    assert plain.returncode == 0 and plain.stdout != BUGGY  # without force-exclude the buffer is fixed
