"""The README's first two commands work on a fresh Debian 12 machine: PEP 668 refuses a bare
`pip install`, so the first makes a virtual environment; torch's CPU build is named with its
index; `.ci/run` runs exactly these commands."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def readme_commands() -> list[str]:
    """The lines of the README's first ```sh block."""
    block = README.split("```sh\n", 1)[1].split("```", 1)[0]
    return block.splitlines()


def test_readme_starts_with_a_virtual_environment_and_the_cpu_build() -> None:
    first, second = readme_commands()
    assert README.index("```sh") < 20, "the commands come first"
    assert first == "python3 -m venv .venv && . .venv/bin/activate && pip install . && graphfix --diff examples/"
    torch_step, *rest = second.split(" && ")
    assert torch_step == "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu --extra-index-url https://pypi.org/simple"
    assert rest == ["pip install '.[test]'", "python -m pytest"]
    prose = " ".join(README[:README.index("## Usage")].split())
    assert "PEP 668" in prose and "pipx install ." in prose
    assert "--extra-index-url" in prose and "CUDA build" in prose


def test_ci_runs_the_readme_commands() -> None:
    printed = subprocess.run(["bash", str(ROOT / ".ci" / "run"), "--print-commands"], capture_output=True, text=True, check=True, timeout=30)
    assert printed.stdout.splitlines() == readme_commands()


@pytest.mark.skipif(shutil.which("git") is None or sys.platform == "win32", reason="needs git and a POSIX shell")
def test_first_command_on_a_fresh_home(tmp_path: Path) -> None:
    """README command 1, verbatim, in a copy of the tracked tree, with an empty HOME (no git
    identity, no user pip configuration): the examples' diffs and exit 1."""
    tree = tmp_path / "checkout"
    tree.mkdir()
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "VIRTUAL_ENV", "PYTHON"))}
    env.update(HOME=str(tmp_path), PATH=os.defpath + os.pathsep + env.get("PATH", ""))
    done = subprocess.run(["bash", "-c", readme_commands()[0]], cwd=tree, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr[-2000:]
    assert done.stdout.count("\n+++ b/examples/") == 3
    assert "would fix 3 file(s)" in done.stderr
    assert (tree / ".venv" / "bin" / "graphfix").exists()
