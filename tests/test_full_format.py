"""`--output-format full` (ruff's default): the finding's source lines with a caret range and the
fix's title, in files and notebook cells; colours on a terminal, off with NO_COLOR or --color never."""

from __future__ import annotations

import io
from pathlib import Path

from fixer.full_format import color_enabled
from tests.test_discovery import BUGGY, graphfix, write
from tests.test_notebooks import LOOP, SETUP, notebook

FRAME = """\
train.py:15:5: GF301 [*] `running_loss` accumulates `loss` with its autograd graph, keeping every iteration's graph alive; accumulate `loss.item()`
   |
14 |     optimizer.step()
15 |     running_loss += loss
   |     ^^^^^^^^^^^^^^^^^^^^ GF301
16 | average = running_loss / 8
   |
   = help: Accumulate `loss.item()`

"""


def test_full_shows_the_line_a_caret_range_and_the_fix(tmp_path: Path) -> None:
    write(tmp_path, {"train.py": BUGGY})
    done = graphfix("--output-format", "full", "train.py", cwd=tmp_path)
    assert (done.returncode, done.stdout.decode()) == (1, FRAME)
    assert b"\x1b[" not in done.stdout  # not a terminal: no colour


def test_full_in_a_notebook_shows_the_cells_source(tmp_path: Path) -> None:
    (tmp_path / "nb.ipynb").write_text(notebook([SETUP, LOOP]), encoding="utf-8")
    out = graphfix("--output-format", "full", "nb.ipynb", cwd=tmp_path).stdout.decode()
    assert out.startswith("nb.ipynb:cell 3:4:5: GF301 [*] ")
    assert "4 |     total_loss += loss\n  |     ^^^^^^^^^^^^^^^^^^ GF301\n" in out


def test_colour_flag_and_no_color(tmp_path: Path, monkeypatch) -> None:
    write(tmp_path, {"train.py": BUGGY})
    painted = graphfix("--color", "always", "train.py", cwd=tmp_path).stdout.decode()
    assert painted.startswith("\x1b[1mtrain.py:15:5\x1b[0m: \x1b[1m\x1b[31mGF301\x1b[0m ")
    assert "\x1b[" not in graphfix("--color", "never", "--output-format", "full", "train.py", cwd=tmp_path).stdout.decode()
    assert graphfix("--color", "sometimes", "train.py", cwd=tmp_path).returncode == 2

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert color_enabled("auto", Terminal()) and not color_enabled("auto", io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not color_enabled("auto", Terminal()) and color_enabled("always", Terminal())
