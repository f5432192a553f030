"""graphfix.toml and .graphfix.toml are read as ruff reads ruff.toml and .ruff.toml: the keys at
the top level; in one folder .graphfix.toml > graphfix.toml > pyproject.toml with [tool.graphfix];
the nearest folder's config decides; --config takes either kind."""

from __future__ import annotations

from pathlib import Path

from tests.test_discovery import BUGGY, graphfix, write


def findings(cwd: Path, *args: str) -> tuple[int, str]:
    done = graphfix(*args, "--no-cache", cwd=cwd)
    return done.returncode, done.stdout.decode()


def test_graphfix_toml_keys_at_the_top_level(tmp_path):
    write(tmp_path, {"train.py": BUGGY})
    assert findings(tmp_path)[0] == 1
    (tmp_path / "graphfix.toml").write_text('ignore = ["GF301"]\n')
    assert findings(tmp_path) == (0, "")
    (tmp_path / "graphfix.toml").unlink()
    (tmp_path / ".graphfix.toml").write_text('per-file-ignores = { "train.py" = ["GF301"] }\n')
    assert findings(tmp_path) == (0, "")


def test_precedence_in_one_folder_as_ruff(tmp_path):
    write(tmp_path, {"train.py": BUGGY, "pyproject.toml": '[tool.graphfix]\nignore = ["GF301"]\n'})
    assert findings(tmp_path)[0] == 0
    (tmp_path / "graphfix.toml").write_text("ignore = []\n")  # graphfix.toml wins over pyproject.toml
    code, out = findings(tmp_path)
    assert code == 1 and " GF301 " in out
    (tmp_path / ".graphfix.toml").write_text('ignore = ["GF3"]\n')  # .graphfix.toml wins over both
    assert findings(tmp_path)[0] == 0


def test_the_nearest_folder_decides_and_a_pyproject_without_a_table_does_not_hide(tmp_path):
    write(tmp_path, {"graphfix.toml": 'ignore = ["GF301"]\n', "a/train.py": BUGGY, "b/train.py": BUGGY,
                     "b/pyproject.toml": "[project]\nname = 'b'\n", "a/.graphfix.toml": "select = ['GF3']\n"})
    code, out = findings(tmp_path)
    assert code == 1 and out.startswith("a/train.py:") and "b/train.py" not in out
    code, out = findings(tmp_path / "b", ".")  # from below: the config above is found
    assert (code, out) == (0, "")


def test_config_flag_and_bad_keys(tmp_path):
    write(tmp_path, {"train.py": BUGGY, "other.toml": 'ignore = ["GF301"]\n', "graphfix.toml": 'ignore = ["GF301"]\n'})
    assert findings(tmp_path, "--config", "graphfix.toml")[0] == 0
    assert findings(tmp_path, "--config", "other.toml")[0] == 1  # only the two names hold top-level keys
    (tmp_path / "graphfix.toml").write_text('[tool.graphfix]\nignore = ["GF301"]\n')  # a table: as ruff.toml, no
    done = graphfix(".", cwd=tmp_path)
    assert done.returncode == 2 and b"graphfix.toml: unknown option" in done.stderr and b" tool" in done.stderr
