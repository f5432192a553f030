"""The command-line contract, run as a user runs it (a subprocess)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUGGY = (ROOT / "fixtures/loss_accumulated_with_graph/plain_loop.before.py").read_text()
FIXED = (ROOT / "fixtures/loss_accumulated_with_graph/plain_loop.after.py").read_text()
BUGGY = BUGGY.replace("  # expect: GF301", "")
CLEAN = (ROOT / "fixtures/loss_accumulated_with_graph/item_already.ok.py").read_text()


def graphfix(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "fixer", *args], cwd=cwd, input=stdin, capture_output=True, env=env, timeout=120
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(BUGGY)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def test_check_reports_findings_and_exits_1(project):
    out = graphfix("train.py", "clean.py", cwd=project)
    assert out.returncode == 1
    lines = out.stdout.decode().splitlines()
    assert lines == [f"train.py:15:5: GF301 [*] {lines[0].split('[*] ', 1)[1]}"]
    assert "running_loss" in lines[0] and "loss.item()" in lines[0]
    assert b"1 finding" in out.stderr
    assert (project / "train.py").read_text() == BUGGY  # check never writes


def test_clean_file_exits_0_silently(project):
    out = graphfix("clean.py", cwd=project)
    assert (out.returncode, out.stdout) == (0, b"")


def test_diff_is_git_applicable_and_writes_nothing(project):
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    out = graphfix("--diff", ".", cwd=project)
    assert out.returncode == 1
    diff = out.stdout.decode()
    assert "--- a/train.py\n+++ b/train.py\n" in diff and "+    running_loss += loss.item()\n" in diff
    assert (project / "train.py").read_text() == BUGGY
    subprocess.run(["git", "apply", "-"], cwd=project, input=out.stdout, check=True)
    assert (project / "train.py").read_text() == FIXED


def test_diff_without_changes_prints_nothing(project):
    out = graphfix("--diff", "clean.py", cwd=project)
    assert (out.returncode, out.stdout) == (0, b"")


def test_fix_writes_and_second_run_is_clean(project):
    out = graphfix("--fix", ".", cwd=project)
    assert out.returncode == 0, out.stderr
    assert (project / "train.py").read_text() == FIXED
    again = graphfix(".", cwd=project)
    assert (again.returncode, again.stdout) == (0, b"")


def test_stdin_fix_prints_fixed_source(project):
    out = graphfix("--fix", "-", "--stdin-filename", "train.py", cwd=project, stdin=BUGGY.encode())
    assert out.returncode == 0
    assert out.stdout.decode() == FIXED
    diff = graphfix("--diff", "-", "--stdin-filename", "pkg/train.py", cwd=project, stdin=BUGGY.encode())
    assert diff.returncode == 1 and b"+++ b/pkg/train.py" in diff.stdout
    check = graphfix("-", "--stdin-filename", "train.py", cwd=project, stdin=BUGGY.encode())
    assert check.stdout.startswith(b"train.py:15:5: GF301")


def test_bad_files_are_reported_and_the_rest_still_fixed(project):
    (project / "broken.py").write_text("def f(:\n    loss.backward()\n")
    (project / "binary.py").write_bytes(b"x.backward()\0\1\2")
    (project / "latin.py").write_bytes(b"loss.backward()\n\xff\xfe = 1\n")
    out = graphfix("--fix", ".", cwd=project)
    assert out.returncode == 123
    errors = out.stderr.decode().splitlines()
    assert any(line.startswith("broken.py: error: cannot parse") for line in errors)
    assert any(line.startswith("binary.py: error: binary file") for line in errors)
    assert any(line.startswith("latin.py: error: cannot decode") for line in errors)
    assert "Traceback" not in out.stderr.decode()
    assert (project / "train.py").read_text() == FIXED


def test_missing_path_is_an_error(project):
    out = graphfix("nope.py", cwd=project)
    assert out.returncode == 123 and b"nope.py" in out.stderr


def test_fix_keeps_crlf_bom_encoding_and_permissions(tmp_path):
    crlf = tmp_path / "crlf.py"
    crlf.write_bytes(b"\xef\xbb\xbf" + BUGGY.replace("\n", "\r\n").encode())
    crlf.chmod(0o755)
    latin = tmp_path / "latin.py"
    latin.write_bytes(("# -*- coding: latin-1 -*-\n# caf\xe9\n" + BUGGY).encode("latin-1"))
    out = graphfix("--fix", ".", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert crlf.read_bytes() == b"\xef\xbb\xbf" + FIXED.replace("\n", "\r\n").encode()
    assert stat.S_IMODE(crlf.stat().st_mode) == 0o755
    assert latin.read_bytes() == ("# -*- coding: latin-1 -*-\n# caf\xe9\n" + FIXED).encode("latin-1")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".graphfix")] == []


def test_crlf_diff_applies(tmp_path):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "w.py").write_bytes(BUGGY.replace("\n", "\r\n").encode())
    out = graphfix("--diff", ".", cwd=tmp_path)
    subprocess.run(["git", "apply", "-"], cwd=tmp_path, input=out.stdout, check=True)
    assert (tmp_path / "w.py").read_bytes() == FIXED.replace("\n", "\r\n").encode()


def test_suppression_comment(project):
    (project / "train.py").write_text(BUGGY.replace("running_loss += loss\n", "running_loss += loss  # graphfix: ignore[GF301]\n"))
    assert graphfix("train.py", cwd=project).returncode == 0
    (project / "train.py").write_text(BUGGY.replace("running_loss += loss\n", "running_loss += loss  # graphfix: ignore[GF999]\n"))
    assert graphfix("train.py", cwd=project).returncode == 1


def test_select_ignore_and_pyproject(project):
    assert graphfix("--ignore", "GF301", "train.py", cwd=project).returncode == 0
    assert graphfix("--select", "GF3", "train.py", cwd=project).returncode == 1
    assert graphfix("--select", "loss-accumulated-with-graph", "train.py", cwd=project).returncode == 1
    bad = graphfix("--select", "GF999", "train.py", cwd=project)
    assert bad.returncode == 2 and b"GF999" in bad.stderr  # a usage error, as ruff
    (project / "pyproject.toml").write_text('[tool.graphfix]\nignore = ["GF301"]\n')
    assert graphfix("train.py", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text("[tool.graphfix]\nno-such-option = 1\n")
    out = graphfix("train.py", cwd=project)
    assert out.returncode == 2 and b"no-such-option" in out.stderr  # a configuration error, as ruff


def test_json_output(project):
    out = graphfix("--output-format", "json", "train.py", cwd=project)
    records = json.loads(out.stdout)
    assert [(r["code"], r["filename"], r["location"]) for r in records] == [("GF301", "train.py", {"row": 15, "column": 5})]
    assert records[0]["fix"]["applicability"] == "safe"
    assert records[0]["fix"]["edits"] == [
        {"content": "loss.item()", "location": {"row": 15, "column": 21}, "end_location": {"row": 15, "column": 25}}
    ]


def test_gitignored_and_virtualenv_files_are_skipped(project):
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / ".gitignore").write_text("generated/\n")
    for folder in ("generated", "venv_x", ".hidden"):
        (project / folder).mkdir()
        (project / folder / "t.py").write_text(BUGGY)
    (project / "venv_x" / "pyvenv.cfg").write_text("")
    out = graphfix(".", cwd=project)
    assert out.stdout.decode().count("GF301") == 1


def test_parallel_run_matches_serial(project):
    for index in range(20):
        shutil.copy(project / "train.py", project / f"t{index:02}.py")
    serial = graphfix("-j", "1", ".", cwd=project)
    parallel = graphfix("-j", "2", ".", cwd=project)
    assert serial.stdout == parallel.stdout and serial.stdout.count(b"GF301") == 21


def test_rules_and_explain(project):
    rules = graphfix("rules", cwd=project).stdout.decode()
    assert "GF301" in rules and "loss-accumulated-with-graph" in rules
    doc = graphfix("explain", "GF301", cwd=project)
    assert doc.returncode == 0 and b"## Why is this bad?" in doc.stdout
    assert graphfix("explain", "GF999", cwd=project).returncode != 0


def test_statistics_and_exit_non_zero_on_fix(project):
    (project / "more.py").write_text(BUGGY)
    out = graphfix("--statistics", ".", cwd=project)
    assert out.returncode == 1
    assert out.stdout.decode().split() == ["2", "GF301", "loss-accumulated-with-graph"]
    assert graphfix("--fix", "--exit-non-zero-on-fix", ".", cwd=project).returncode == 1
    assert graphfix("--fix", "--exit-non-zero-on-fix", ".", cwd=project).returncode == 0


def test_fix_through_a_symlink_keeps_the_link(tmp_path):
    (tmp_path / "real.py").write_text(BUGGY)
    (tmp_path / "link.py").symlink_to(tmp_path / "real.py")
    assert graphfix("--fix", "link.py", cwd=tmp_path).returncode == 0
    assert (tmp_path / "link.py").is_symlink()
    assert (tmp_path / "real.py").read_text() == FIXED
