"""The README's editor recipe, run in real vim (headless): the buffer is replaced by graphfix's
stdout and vim's filter also captures stderr, so the buffer must come back fixed or unchanged,
never with a message in it. CI installs Debian's vim (.ci/run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VIM = shutil.which("vim")
pytestmark = pytest.mark.skipif(VIM is None, reason="vim is not installed (CI installs it)")

BUGGY = (ROOT / "fixtures/loss_accumulated_with_graph/plain_loop.before.py").read_text().replace("  # expect: GF301", "")
FIXED = (ROOT / "fixtures/loss_accumulated_with_graph/plain_loop.after.py").read_text()
UNSAFE_ONLY = (ROOT / "examples/seed001_double_backward.py").read_bytes()


def filter_in_vim(path: Path) -> bytes:
    """`:%!graphfix --fix --stdin-filename % --silent`, then write and quit, as a user would."""
    command = f"{sys.executable} -m fixer --fix --stdin-filename % --silent"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [VIM, "-Nu", "NONE", "-i", "NONE", "-n", "-es", "-c", f"%!{command}", "-c", "wq", str(path)],
        env=env, cwd=path.parent, timeout=60, check=False, stdin=subprocess.DEVNULL, capture_output=True,
    )
    return path.read_bytes()


@pytest.mark.parametrize(
    "before,after",
    [
        pytest.param(BUGGY.encode(), FIXED.encode(), id="buggy-fixed"),
        pytest.param(FIXED.encode(), FIXED.encode(), id="clean-unchanged"),
        pytest.param(UNSAFE_ONLY, UNSAFE_ONLY, id="unsafe-findings-unchanged"),
        pytest.param(b"x = 1\nloss.backward(\n", b"x = 1\nloss.backward(\n", id="syntax-error-unchanged"),
    ],
)
def test_the_readme_recipe_in_vim(tmp_path, before, after):
    path = tmp_path / "train.py"
    path.write_bytes(before)
    assert filter_in_vim(path) == after
