"""Config per checked file, as ruff: the nearest pyproject.toml with [tool.graphfix] above each
file decides; paths in it are relative to its folder; per-file-ignores; --config for all."""

from __future__ import annotations


from tests.test_discovery import BUGGY, graphfix, write

IGNORE_301 = '[tool.graphfix]\nignore = ["GF301"]\n'


def reported(out) -> set[str]:
    """The files with a finding, as printed."""
    return {line.split(":")[0] for line in out.stdout.decode().splitlines() if ": GF" in line}


def test_each_repository_keeps_its_own_config_when_run_from_a_parent(tmp_path):
    write(tmp_path, {
        "repoA/pyproject.toml": IGNORE_301, "repoA/train.py": BUGGY,
        "repoA/sub/pyproject.toml": '[project]\nname = "sub"\ndependencies = ["graphfix"]\n',  # no table: does not hide repoA's
        "repoA/sub/train.py": BUGGY,
        "repoB/train.py": BUGGY,
    })
    out = graphfix("repoA", "repoB", cwd=tmp_path)
    assert reported(out) == {"repoB/train.py"}, out
    assert reported(graphfix(".", cwd=tmp_path / "repoA" / "sub")) == set()  # from inside: the same answer
    # with no config above a file, the one found from the current folder decides
    (tmp_path / "pyproject.toml").write_text('[tool.graphfix]\nselect = ["GF2"]\n')
    assert reported(graphfix("repoA", "repoB", cwd=tmp_path)) == set()


def test_exclude_is_relative_to_the_config_that_names_it(tmp_path):
    write(tmp_path, {
        "repoA/pyproject.toml": '[tool.graphfix]\nexclude = ["/top.py"]\nextend-exclude = ["gen/*.py"]\n',
        "repoA/top.py": BUGGY, "repoA/pkg/top.py": BUGGY, "repoA/gen/g.py": BUGGY, "repoA/pkg/gen/g.py": BUGGY,
        "repoB/top.py": BUGGY, "repoB/gen/g.py": BUGGY,
    })
    expected = {"repoA/pkg/top.py", "repoA/pkg/gen/g.py", "repoB/top.py", "repoB/gen/g.py"}
    assert reported(graphfix("repoA", "repoB", cwd=tmp_path)) == expected
    assert reported(graphfix(".", cwd=tmp_path)) == expected
    assert reported(graphfix("pkg", cwd=tmp_path / "repoA")) == {"pkg/top.py", "pkg/gen/g.py"}


def test_per_file_ignores_match_as_ruff_does(tmp_path):
    write(tmp_path, {
        "pyproject.toml": '[tool.graphfix.per-file-ignores]\n"tests/*" = ["GF301"]\n"conftest.py" = ["loss-accumulated-with-graph"]\n'
                          '"!scripts/*" = ["GF2"]\n',
        "train.py": BUGGY, "tests/test_a.py": BUGGY, "tests/deep/test_b.py": BUGGY, "pkg/conftest.py": BUGGY,
        "scripts/run.py": BUGGY,
    })
    out = graphfix(".", cwd=tmp_path)
    assert reported(out) == {"train.py", "scripts/run.py"}, out
    fixed = graphfix("--fix", ".", cwd=tmp_path)  # an ignored rule is not fixed either
    assert fixed.returncode == 0 and (tmp_path / "tests/test_a.py").read_text() == BUGGY


def test_config_flag_decides_for_every_file_and_its_paths_are_relative_to_the_current_folder(tmp_path):
    write(tmp_path, {
        "repoA/pyproject.toml": IGNORE_301, "repoA/train.py": BUGGY, "repoA/gen/g.py": BUGGY,
        "shared.toml": '[tool.graphfix]\nexclude = ["repoA/gen"]\n',
    })
    out = graphfix("--config", "shared.toml", "repoA", cwd=tmp_path)
    assert reported(out) == {"repoA/train.py"}, out


def test_a_broken_config_stops_only_the_files_below_it(tmp_path):
    write(tmp_path, {
        "repoA/pyproject.toml": "[tool.graphfix]\nselct = []\n", "repoA/train.py": BUGGY,
        "repoB/pyproject.toml": '[tool.graphfix]\nselect = ["GF999"]\n', "repoB/train.py": BUGGY,
        "repoC/train.py": BUGGY,
    })
    out = graphfix("repoA", "repoB", "repoC", "repoA/train.py", cwd=tmp_path)
    assert out.returncode == 2 and reported(out) == {"repoC/train.py"}, out
    assert b"unknown option [tool.graphfix] selct" in out.stderr and b"GF999" in out.stderr


def test_stdin_takes_the_config_of_the_file_it_names(tmp_path):
    write(tmp_path, {"repoA/pyproject.toml": IGNORE_301, "repoB/x": ""})
    for name, code in (("repoA/train.py", 0), ("repoB/train.py", 1)):
        out = graphfix("--stdin-filename", name, cwd=tmp_path, stdin=BUGGY.encode())
        assert out.returncode == code, (name, out)


def test_each_repository_gitignore_is_honoured_from_a_parent(tmp_path):
    for repo in ("repoA", "repoB"):
        write(tmp_path, {f"{repo}/.gitignore": "ignored/\n", f"{repo}/ignored/t.py": BUGGY, f"{repo}/train.py": BUGGY})
        (tmp_path / repo / ".git").mkdir()
    assert reported(graphfix(".", cwd=tmp_path)) == {"repoA/train.py", "repoB/train.py"}
    (tmp_path / ".git").mkdir()  # the parent a repository too: each nested one keeps its own rules
    assert reported(graphfix(".", cwd=tmp_path)) == {"repoA/train.py", "repoB/train.py"}
