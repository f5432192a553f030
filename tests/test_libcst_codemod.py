"""graphfix as a LibCST codemod command: the real `python -m libcst.tool codemod` runner fixes copies
of the fixtures to their .after.py, leaves ok and after files alone, reports every finding as a
warning, and with safe fixes only changes exactly what `graphfix --fix` changes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import strip_markers
from tests.test_discovery import ROOT, graphfix

pytest.importorskip("libcst")

FIXTURES = ROOT / "fixtures"
COMMAND = "fixer.libcst_codemod.GraphfixCommand"


def codemod(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "libcst.tool", "codemod", *args], cwd=cwd, capture_output=True, env=env, timeout=120)


def copy(rule_folder: str, to: Path) -> dict[str, str]:
    """The fixture folder's files (markers stripped; no oracles) in ``to``; relative name -> the text
    expected after fixing."""
    expected = {}
    source = FIXTURES / rule_folder
    for path in sorted(source.rglob("*.py")):
        if path.name.endswith(".oracle.py"):
            continue
        name = path.relative_to(source).as_posix()
        text = strip_markers(path.read_text())
        (to / name).parent.mkdir(parents=True, exist_ok=True)
        (to / name).write_text(text)
        after = path.with_name(path.name.replace(".before.py", ".after.py"))
        expected[name] = after.read_text() if path.name.endswith(".before.py") else text
    return expected


def contents(folder: Path) -> dict[str, str]:
    return {path.relative_to(folder).as_posix(): path.read_text() for path in sorted(folder.rglob("*.py"))}


def test_the_runner_fixes_fixtures_to_their_after_files_with_safe_fixes_by_default(tmp_path):
    expected = copy("loss_accumulated_with_graph", tmp_path / "src")
    out = codemod("-x", COMMAND, "--no-format", "--hide-progress", "--select", "GF301", "src", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    assert contents(tmp_path / "src") == expected
    assert any(name.endswith(".ok.py") for name in expected) and any(name.endswith(".after.py") for name in expected)
    warnings = [line for line in out.stderr.decode().splitlines() if line.startswith("WARNING: ")]
    befores = [name for name in expected if name.endswith(".before.py")]
    assert len(warnings) >= len(befores) and all(": GF301 [*] " in line for line in warnings)
    assert "WARNING: src/plain_loop.before.py:" in out.stderr.decode()
    assert b" - Failed to codemod 0 files." in out.stderr


def test_unsafe_fixes_through_the_modules_of_a_libcst_config(tmp_path):
    expected = copy("repeated_backward", tmp_path / "src")
    (tmp_path / ".libcst.codemod.yaml").write_text("modules:\n- fixer\n")
    out = codemod("libcst_codemod.GraphfixCommand", "--unsafe-fixes", "--select", "GF106", "--no-format", "--hide-progress", "src", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    assert contents(tmp_path / "src") == expected
    assert b"GF106 [*]" in out.stderr and b"GF106 [-]" not in out.stderr


def test_safe_fixes_change_what_graphfix_fix_changes_and_name_the_unsafe_ones(tmp_path):
    copy("repeated_backward", tmp_path / "cst")
    copy("repeated_backward", tmp_path / "cli")
    before = contents(tmp_path / "cst")
    diff = codemod("-x", COMMAND, "-u", "--no-format", "--hide-progress", "cst", cwd=tmp_path)
    assert contents(tmp_path / "cst") == before  # -u prints diffs, writes nothing
    added = [line for line in diff.stdout.splitlines() if line.startswith(b"+") and not line.startswith(b"+++")]
    assert b"cst/grad_norm_then_backward.before.py" in diff.stdout and any(b"retain_graph=True" in line for line in added)
    out = codemod("-x", COMMAND, "--no-format", "--hide-progress", "cst", cwd=tmp_path)
    assert out.returncode == 0, out.stderr.decode()
    graphfix("--fix", "cli", cwd=tmp_path)
    assert contents(tmp_path / "cst") == contents(tmp_path / "cli") != before
    assert out.stderr.count(b"GF106 [-]") > 0 and out.stderr.count(b"GF106 [*]") > 0


def test_an_unknown_rule_fails_every_file_and_changes_nothing(tmp_path):
    copy("loss_accumulated_with_graph", tmp_path / "src")
    before = contents(tmp_path / "src")
    out = codemod("-x", COMMAND, "--no-format", "--hide-progress", "--select", "GF999", "src", cwd=tmp_path)
    assert out.returncode == 1 and b"graphfix: unknown rule selector(s): GF999 (see `graphfix rules`)" in out.stderr
    assert contents(tmp_path / "src") == before and b" - Transformed 0 files successfully." in out.stderr
