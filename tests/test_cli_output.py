"""The check's output contracts a newcomer meets first: --statistics honours --output-format json,
--output-file takes the report, and every --help fits 80 columns with no option name cut."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_discovery import BUGGY, ROOT, graphfix, write


def test_statistics_honours_json(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": BUGGY, "b.py": BUGGY})
    done = graphfix("--statistics", "--output-format", "json", ".", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout) == [{"code": "GF301", "name": "loss-accumulated-with-graph", "count": 2, "fixable": True}]
    text = graphfix("--statistics", ".", cwd=tmp_path).stdout.decode()
    assert text == "     2  GF301  loss-accumulated-with-graph\n"


def test_output_file_takes_the_report(tmp_path: Path) -> None:
    write(tmp_path, {"a.py": BUGGY})
    done = graphfix("--output-format", "json", "-o", "report.json", "a.py", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (1, b"")
    assert json.loads((tmp_path / "report.json").read_text())[0]["code"] == "GF301"
    assert b"1 finding(s)" in done.stderr  # the summary stays on stderr
    diff = graphfix("--diff", "--output-file", "fix.diff", "a.py", cwd=tmp_path)
    assert diff.stdout == b"" and (tmp_path / "fix.diff").read_text().startswith("diff --git a/a.py b/a.py\n")
    bad = graphfix("-o", str(tmp_path / "no" / "such.json"), "a.py", cwd=tmp_path)
    assert bad.returncode == 2 and b"--output-file " in bad.stderr


def help_text(*args: str, columns: int) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(columns)}
    done = subprocess.run([sys.executable, "-m", "fixer", *args], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("columns", [80, 200])
def test_help_fits_80_columns_and_names_every_option_in_full(columns: int) -> None:
    text = help_text("--help", columns=columns)
    assert max(map(len, text.splitlines())) <= 80
    for name in ("--exclude, --extend-exclude", "--no-respect-gitignore", "--exit-non-zero-on-fix",
                 "--unsafe-fixes / --no-unsafe-fixes", "-o, --output-file FILE", "--max-file-size"):
        assert name in text, name
    assert "…" not in text and "\\[" not in text
    for command in (["rules", "--help"], ["explain", "--help"], ["clean", "--help"], ["run", "--help"]):
        assert max(map(len, help_text(*command, columns=min(columns, 80)).splitlines())) <= 80, command
