"""`python -m graphfix` is the command line (a CI step written as `python -m ruff` is written must
fail on findings), and `import graphfix` stays the runtime API without importing the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.test_discovery import BUGGY, ROOT


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_python_m_graphfix_is_the_cli(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(BUGGY)
    done = run("-m", "graphfix", "train.py", cwd=tmp_path)
    assert done.returncode == 1, done
    assert done.stdout.startswith("train.py:") and " GF301 [*] " in done.stdout
    assert "1 finding(s)" in done.stderr
    assert run("-m", "graphfix", "--version", cwd=tmp_path).stdout.startswith("graphfix ")


def test_import_graphfix_is_the_runtime_api(tmp_path: Path) -> None:
    probe = "import sys, graphfix; print(callable(graphfix.watch), graphfix.__version__ != '', 'fixer.cli' in sys.modules, 'typer' in sys.modules)"
    assert run("-c", probe, cwd=tmp_path).stdout.split() == ["True", "True", "False", "False"]
