"""`graphfix run`'s report never mixes with the program's prints: JSON on stdout sends the
program's stdout to stderr, `--output FILE` writes the report to a file; one summary line on
stderr ends every run, a clean one included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_runtime_cli import graphfix_run, program

pytest.importorskip("torch", reason="graphfix run executes programs, which need torch")

LEAKY = """\
    import sys, torch
    w = torch.zeros(3, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    total = 0
    for step in range(3):
        opt.zero_grad()
        loss = (w - 1).pow(2).sum()
        loss.backward()
        opt.step()
        total += loss
        print("step", step)
    sys.stdout.flush()
    import os; os.write(1, b"raw fd 1\\n")
"""


def test_json_on_stdout_is_only_the_report(tmp_path: Path) -> None:
    program(tmp_path, LEAKY)
    done = graphfix_run("--output-format", "json", "train.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    records = json.loads(done.stdout)  # the program's prints are not in it
    assert [(r["code"], r["filename"], r["location"]["row"]) for r in records] == [("GF301", "train.py", 10)]
    assert "step 0\nstep 1\nstep 2\nraw fd 1\n" in done.stderr
    assert done.stderr.rstrip().splitlines()[-1] == (
        "graphfix run: watched train.py: 3 iteration(s), 3 optimizer step(s); 1 finding(s); the program exited 0"
    )


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_output_file_takes_the_report_and_stdout_stays_the_programs(tmp_path: Path, fmt: str) -> None:
    program(tmp_path, LEAKY)
    done = graphfix_run("--output-format", fmt, "--output", "report.out", "train.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout == "step 0\nstep 1\nstep 2\nraw fd 1\n"
    written = (tmp_path / "report.out").read_text()
    if fmt == "json":
        assert json.loads(written)[0]["code"] == "GF301"
    else:
        assert written.startswith("train.py:10:5: GF301 ")
    assert "1 finding(s) (written to report.out); the program exited 0" in done.stderr


def test_a_clean_run_says_what_it_watched_and_a_bad_output_is_an_error(tmp_path: Path) -> None:
    program(tmp_path, LEAKY.replace("total += loss", "total += loss.item()"))
    done = graphfix_run("--max-steps", "2", "train.py", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "step 0\n", done.stderr
    assert done.stderr.rstrip().splitlines()[-1] == (
        "graphfix run: watched train.py: 2 iteration(s), 2 optimizer step(s); 0 finding(s); stopped by --max-steps"
    )
    bad = graphfix_run("--output", str(tmp_path / "no" / "such" / "r.json"), "train.py", cwd=tmp_path)
    assert bad.returncode == 123 and "graphfix run: error: --output " in bad.stderr


def test_every_option_that_takes_a_value_keeps_it_when_the_script_is_found():
    """`graphfix run --output FILE train.py` read FILE as the script (--output was missing from VALUED)."""
    from fixer.runtime.arguments import VALUED, parser, split

    valued = {name for action in parser()._actions if action.option_strings and action.nargs != 0 for name in action.option_strings}
    assert valued - {"-m"} == set(VALUED)  # -m MODULE ends graphfix's options (split handles it)
    assert split(["--output", "r.json", "train.py", "--lr", "1"]) == (["--output", "r.json"], ["train.py", "--lr", "1"])


LOOKED_AT = """\
    import warnings


    class Deprecated:
        @property
        def __class__(self):  # as a deprecated alias answers isinstance() (torch.distributed.reduce_op)
            warnings.warn("Deprecated was looked at", FutureWarning, stacklevel=2)
            return type(self)


    alias = Deprecated()
""" + LEAKY


@pytest.mark.parametrize("mode", [(), ("--diff",)], ids=["watch", "diff"])
def test_the_sanitizer_looks_at_objects_without_triggering_their_warnings(tmp_path: Path, mode: tuple) -> None:
    """The holder walk and the parameter scan classified each object with isinstance() (through
    ``__class__``): a program holding a deprecated alias printed torch's FutureWarning under
    `graphfix run` only (blind5 001, 008, 009)."""
    program(tmp_path, LOOKED_AT)
    done = graphfix_run(*mode, "train.py", cwd=tmp_path)
    assert "GF301" in done.stderr + done.stdout  # the walk ran (it found the leak)
    assert "was looked at" not in done.stderr
