"""``graphfix run`` and the ways a program ends or takes its arguments (reviews of 2026-11-27):
``--max-steps`` stops a loop whose bare ``except:`` swallows the stop (R5); ``os._exit``,
``sys.exit`` and Ctrl-C still give the report and the program's exit code; ``-m MODULE`` passes
every option after it to the program, as ``python -m`` does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="graphfix run executes the programs, which need torch")

ROOT = Path(__file__).resolve().parent.parent

STEP = """\
import torch
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(4, 3)
"""
# a graph leak (GF301): every loss is kept with its graph
LEAK = STEP + """\
total = 0
for i in range(8):
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    total = total + loss
"""


def graphfix_run(tmp_path: Path, text: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    (tmp_path / "train.py").write_text(textwrap.dedent(text), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "fixer", "run", *args]
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("handler", [
    "    except:\n        continue\n",
    "    except BaseException as exc:\n        try:\n            print('retrying after', type(exc).__name__)\n        except BaseException:\n            pass\n",
], ids=["bare-except", "nested-base-exception"])
def test_max_steps_stops_a_loop_that_swallows_the_stop(tmp_path: Path, handler: str) -> None:
    text = STEP + "while True:\n    try:\n        opt.zero_grad(); model(x).sum().backward(); opt.step()\n" + handler
    result = graphfix_run(tmp_path, text, "--max-steps", "5", "train.py", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "stopped after" in result.stderr and "(--max-steps)" in result.stderr
    assert result.stdout.count("retrying after") <= 1


def test_os_exit_still_reports_and_names_the_exit_code(tmp_path: Path) -> None:
    result = graphfix_run(tmp_path, LEAK + "import os\nos._exit(3)\n", "train.py")
    assert result.returncode == 1, result.stderr
    assert "GF301" in result.stdout
    assert "the program's own exit code was 3" in result.stderr


def test_os_exit_without_a_finding_is_the_programs_code(tmp_path: Path) -> None:
    result = graphfix_run(tmp_path, STEP + "print('done', flush=True)\nimport os\nos._exit(4)\n", "train.py")
    assert (result.returncode, result.stdout) == (4, "done\n") and "Traceback" not in result.stderr


def test_sys_exit_after_a_finding_names_the_exit_code(tmp_path: Path) -> None:
    result = graphfix_run(tmp_path, LEAK + "import sys\nsys.exit(5)\n", "train.py")
    assert result.returncode == 1 and "GF301" in result.stdout
    assert "the program's own exit code was 5" in result.stderr


def test_ctrl_c_in_the_program_exits_130_and_fixes_nothing(tmp_path: Path) -> None:
    text = LEAK + "raise KeyboardInterrupt\n"
    result = graphfix_run(tmp_path, text, "--fix", "train.py")
    assert result.returncode == 130, result.stderr
    assert "GF301" in result.stdout and "KeyboardInterrupt" in result.stderr
    assert (tmp_path / "train.py").read_text() == text


def test_still_held_is_said_once(tmp_path: Path) -> None:
    result = graphfix_run(tmp_path, LEAK, "train.py")
    assert "    still held:" in result.stdout, result.stdout
    assert " at at " not in result.stdout + result.stderr


@pytest.fixture
def package(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "train.py").write_text("import sys\nprint(sys.argv[1:])\n")
    return tmp_path


@pytest.mark.parametrize("args, program_args", [
    (["-m", "pkg.train", "--epochs", "3"], ["--epochs", "3"]),
    (["--max-steps", "2", "-m", "pkg.train", "--lr=0.1", "-v", "--fix"], ["--lr=0.1", "-v", "--fix"]),
    (["-mpkg.train", "-v"], ["-v"]),
    (["-m", "pkg.train", "--", "x"], ["--", "x"]),  # as python -m passes it
], ids=["options", "graphfix-options-first", "joined", "double-dash"])
def test_module_gets_every_option_after_it(package: Path, args: list, program_args: list) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-m", "fixer", "run", *args], cwd=package, env=env, capture_output=True, text=True, timeout=180)
    plain = subprocess.run([sys.executable, "-m", "pkg.train", *program_args], cwd=package, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == plain.stdout == f"{program_args!r}\n"


def test_double_dash_ends_graphfixs_options_before_a_script(tmp_path: Path) -> None:
    result = graphfix_run(tmp_path, "import sys\nprint(sys.argv[1:])\n", "--", "train.py", "--max-steps", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "['--max-steps', '1']\n"


def test_argv_zero_is_the_script_as_typed(tmp_path: Path) -> None:
    text = "import os, sys\nprint(sys.argv, __file__ == os.path.abspath('train.py'))\n"
    result = graphfix_run(tmp_path, text, "train.py", "x")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "['train.py', 'x'] True\n"  # as `python train.py x` prints it


def test_a_torch_warning_names_the_programs_line(tmp_path: Path) -> None:
    text = "import torch\nx = torch.ones(3, requires_grad=True)\ny = (x * 2).sum()\nprint(y.grad)\n"
    result = graphfix_run(tmp_path, text, "train.py")
    assert result.returncode == 0, result.stderr
    assert "train.py:4: UserWarning: The .grad attribute of a Tensor that is not a leaf" in result.stderr, result.stderr
    assert "recorder.py" not in result.stderr


def test_watch_releases_an_insisting_stop_and_the_callers_tracer(capsys) -> None:
    import graphfix
    import torch

    lines = []

    def tracer(frame, event, arg):  # a debugger's or coverage's
        lines.append(event)
        return tracer

    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    retries = 0
    sys.settrace(tracer)
    try:
        with graphfix.watch(max_steps=2):
            while retries < 50:
                try:
                    opt.zero_grad(); model(torch.ones(2)).sum().backward(); opt.step()
                except BaseException:
                    retries += 1
                    continue
        lines.clear()
        after = (lambda: "ran on")()  # the frame that watched goes on; its tracer traces the call
        seen = list(lines)
    finally:
        sys.settrace(None)
    assert retries == 1, "the stop was swallowed again and again"
    assert after == "ran on" and "call" in seen
