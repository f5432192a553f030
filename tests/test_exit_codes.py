"""CI semantics: 0 clean, 1 findings (also `--diff` while unfixed findings remain), 2 usage,
configuration or internal error (a bug of ours), 123 a file that could not be read or parsed;
2 wins over 123, 123 over 1. `graphfix --help` shows the default command's options."""

from __future__ import annotations

import pytest

from fixer import cli, engine, stdin_run
from tests.test_cli import BUGGY, FIXED, ROOT, graphfix

UNSAFE_ONLY = (ROOT / "examples/seed004_zero_grad_order.py").read_text()


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(list(args))
    out = capsys.readouterr()
    return exit_info.value.code, out.out, out.err


@pytest.fixture
def files(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(BUGGY)
    (tmp_path / "clean.py").write_text(FIXED)
    (tmp_path / "unsafe.py").write_text(UNSAFE_ONLY)
    (tmp_path / "broken.py").write_text("def f(:\n    loss.backward()\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_clean_findings_and_unreadable(files, capsys):
    assert run_cli(capsys, "clean.py")[0] == 0
    assert run_cli(capsys, "train.py")[0] == 1
    assert run_cli(capsys, "train.py", "broken.py")[0] == 123


def test_diff_exits_1_while_findings_without_a_safe_fix_remain(files, capsys):
    code, out, err = run_cli(capsys, "--diff", "unsafe.py")
    assert (code, out) == (1, "") and "finding(s) remaining" in err
    assert run_cli(capsys, "--diff", "clean.py")[:2] == (0, "")


@pytest.mark.parametrize("args", [["--bogus", "."], ["--diff", "--fix", "."], ["--select", "GF999", "."],
                                  ["--output-format", "xml", "."], ["explain", "GF999"], ["-j", "-1", "."]])
def test_usage_errors_exit_2(files, capsys, args):
    assert run_cli(capsys, *args)[0] == 2


def test_a_rule_crash_exits_2_even_beside_an_unparsable_file(files, capsys, monkeypatch):
    def crash(rule, ctx):
        raise KeyError("boom")

    monkeypatch.setattr(engine, "_check", crash)
    code, _, err = run_cli(capsys, "train.py", "broken.py")
    assert code == 2 and "crashed: KeyError: 'boom'" in err and "broken.py: error: cannot parse" in err


def test_a_fix_refused_as_broken_exits_2(files, capsys, monkeypatch):
    monkeypatch.setattr(engine, "apply_edits", lambda text, edits: text + "def (:\n")
    code, _, err = run_cli(capsys, "--fix", "train.py")
    assert code == 2 and "produced invalid code" in err
    assert (files / "train.py").read_text() == BUGGY


def test_an_internal_error_on_stdin_exits_2_and_echoes_the_buffer(files, capsys, monkeypatch):
    import io
    import sys

    def boom(*args, **kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(stdin_run, "process_source", boom)  # the stdin check (fixer/stdin_run.py)

    class Stdin:
        buffer = io.BytesIO(BUGGY.encode())

    monkeypatch.setattr(sys, "stdin", Stdin)
    output = io.BytesIO()

    class Stdout:
        buffer = output

        def write(self, text):
            output.write(text.encode())

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", Stdout())
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--fix", "-", "--stdin-filename", "t.py"])
    assert exit_info.value.code == 2 and output.getvalue() == BUGGY.encode()


def test_top_level_help_shows_the_check_options_and_the_other_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    out = graphfix("--help", cwd=tmp_path)
    text = out.stdout.decode()
    assert out.returncode == 0
    for option in ("--diff", "--fix", "--select", "--output-format", "--unsafe-fixes", "--exit-zero"):
        assert option in text
    assert "graphfix rules" in text and "graphfix explain" in text
    assert "[tool.graphfix]" in graphfix("check", "--help", cwd=tmp_path).stdout.decode()
