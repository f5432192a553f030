"""``graphfix --fix --interactive`` on a real terminal: tmux runs it in a detached session, the
test types the answers and reads the screen (``tmux capture-pane``), waiting for each prompt
instead of sleeping, then checks the files byte for byte."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

import pytest

from tests.test_interactive import TRAIN, fixed

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Apply this fix [y,n,a,d,q,?]? "
TIMEOUT = 120.0  # seconds to wait for one screen; the machine may be busy

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")


class Pane:
    """One detached tmux session on a private server, running ``command`` in ``cwd``."""

    def __init__(self, cwd: Path, command: str) -> None:
        self.socket = f"graphfix-test-{uuid.uuid4().hex[:12]}"
        # the shell stays after the command, so its exit status can be read from the screen
        shell = f"{command}; echo \"graphfix exited $?\"; sleep 600"
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", "160", "-y", "50", "-c", str(cwd), shell)

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def screen(self, colours: bool = False) -> str:
        """Everything the pane showed, wrapped lines joined (and with the colours as escapes)."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", *(["-e"] if colours else []))

    def wait(self, ready: Callable[[str], bool], what: str) -> str:
        deadline = time.monotonic() + TIMEOUT
        while True:
            text = self.screen()
            if ready(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} after {TIMEOUT:.0f} s; the screen:\n{text}")
            time.sleep(0.05)

    def answer(self, prompts: int, *keys: str) -> None:
        """Wait for the ``prompts``-th prompt, then type ``keys``."""
        self.wait(lambda text: text.count(PROMPT) >= prompts, f"prompt number {prompts}")
        self.tmux("send-keys", *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


@pytest.fixture
def pane_in(tmp_path):
    panes: list[Pane] = []

    def start(*args: str) -> Pane:
        command = f"env -u NO_COLOR PYTHONPATH={shlex.quote(str(ROOT))} {shlex.quote(sys.executable)} -m fixer --fix --interactive {' '.join(args)}"
        panes.append(Pane(tmp_path, command))
        return panes[-1]

    yield start
    for pane in panes:
        pane.close()


def write_files(folder: Path, names: str) -> None:
    for name in names:
        (folder / f"{name}.py").write_text(TRAIN)


def test_every_answer_on_a_real_terminal(tmp_path, pane_in):
    write_files(tmp_path, "abcde")  # each file has three fixes: GF301 on lines 15, 16, 17
    pane = pane_in(".")
    steps = [
        ("?", "y", "n", "y"),  # a.py: help, then the first and last fix
        ("n", "a"),  # b.py: all but the first
        ("d",),  # c.py: none
        ("y", "q"),  # d.py: the first, then quit; e.py is not reviewed
    ]
    prompts = 0
    for keys in steps:
        for key in keys:
            prompts += 1
            pane.answer(prompts, key, "Enter")
    screen = pane.wait(lambda text: "graphfix exited" in text, "exit")
    assert "graphfix exited 1" in screen  # findings remain
    expected = {"a": fixed(0, 2), "b": fixed(1, 2), "c": TRAIN, "d": fixed(0), "e": TRAIN}
    assert {name: (tmp_path / f"{name}.py").read_bytes() for name in expected} == {
        name: text.encode() for name, text in expected.items()
    }
    assert screen.count(PROMPT) == 9  # eight answers and the prompt again after '?'
    assert "a - apply this fix and all later fixes in the file" in screen
    assert "diff --git a/a.py b/a.py" in screen and "diff --git a/e.py b/e.py" not in screen
    assert "a.py:15:5: GF301 `total` accumulates `loss`" in screen and "(3/3) " + PROMPT in screen
    assert "-    total += loss\n+    total += loss.item()\n" in screen
    assert "graphfix: 5 fix(es) accepted, 7 skipped; 3 file(s) written; 1 file(s) with fixes not reviewed" in screen
    assert "graphfix: fixed 3 file(s);" in screen
    coloured = pane.screen(colours=True)
    assert "\033[31m-    total += loss" in coloured and "\033[32m+    total += loss.item()" in coloured


@pytest.mark.parametrize("key, written, code", [("C-c", TRAIN, 130), ("C-d", fixed(0), 1)])
def test_ctrl_c_writes_nothing_of_the_file_and_end_of_input_writes_what_it_accepted(tmp_path, pane_in, key, written, code):
    write_files(tmp_path, "a")
    pane = pane_in("a.py")
    pane.answer(1, "y", "Enter")
    pane.answer(2, key)
    screen = pane.wait(lambda text: "graphfix exited" in text, "exit")
    assert f"graphfix exited {code}" in screen
    assert (tmp_path / "a.py").read_text() == written
    assert not [name for name in os.listdir(tmp_path) if name != "a.py"]  # no temporary file left


def test_a_batch_of_repositories_is_reviewed_and_its_report_counts_what_was_written(tmp_path, pane_in):
    for repo in ("one", "two"):
        (tmp_path / "repos" / repo).mkdir(parents=True)
        write_files(tmp_path / "repos" / repo, "t")
    pane = pane_in("--repos-in repos --report report.json")
    pane.answer(1, "n", "Enter")
    pane.answer(2, "a", "Enter")  # repos/one/t.py: the second and third fix
    pane.answer(3, "d", "Enter")  # repos/two/t.py: none
    screen = pane.wait(lambda text: "graphfix exited" in text, "exit")
    assert "graphfix exited 1" in screen and "== repos/one: 1 finding(s) in 1 file(s)" in screen
    assert (tmp_path / "repos/one/t.py").read_text() == fixed(1, 2) and (tmp_path / "repos/two/t.py").read_text() == TRAIN
    report = {r["repository"]: r for r in json.loads((tmp_path / "report.json").read_text())["repositories"]}
    assert (report["repos/one"]["fixes_applied"], report["repos/one"]["files_changed"]) == (2, ["t.py"])
    assert (report["repos/two"]["fixes_applied"], report["repos/two"]["files_changed"]) == (0, [])
