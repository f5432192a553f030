"""``--diff`` output is what git applies: random line edits (inserts, deletions, replacements,
repeated lines, a missing final newline) on both sides, each diff applied with ``git apply``
must give the new text exactly."""

from __future__ import annotations

import random
import subprocess

import pytest

from fixer.diff import unified_diff


def _edited(rng: random.Random) -> tuple[str, str]:
    old = [f"line {rng.randint(0, 20)}\n" for _ in range(rng.randint(0, 80))]
    new = list(old)
    for _ in range(rng.randint(1, 8)):
        at = rng.randint(0, len(new))
        roll = rng.random()
        if roll < 0.4:
            new.insert(at, f"new {rng.randint(0, 20)}\n")
        elif new and roll < 0.8:
            del new[min(at, len(new) - 1)]
        elif new:
            new[min(at, len(new) - 1)] = "changed\n"
    before, after = "".join(old), "".join(new)
    if rng.random() < 0.2:
        after = after.rstrip("\n")
    if rng.random() < 0.2:
        before = before.rstrip("\n")
    return before, after


@pytest.mark.parametrize("seed", range(40))
def test_git_applies_the_diff(tmp_path, seed):
    before, after = _edited(random.Random(seed))
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "t.py").write_text(before)
    patch = unified_diff("t.py", before, after)
    if before == after:
        assert patch == ""
        return
    subprocess.run(["git", "apply", "-"], cwd=tmp_path, input=patch.encode(), check=True)
    assert (tmp_path / "t.py").read_text() == after


def test_thousands_of_hunks_are_diffed_hunk_by_hunk():
    """R2: difflib alone searched quadratically; anchors keep every hunk small and exact."""
    body = "def f{}(x):\n    total = 0\n    total += x\n    return total\n\n\n" + "# -\n" * 4
    before = "".join(body.format(i) for i in range(3000))
    after = before.replace("total += x\n", "total += x.item()\n")
    patch = unified_diff("t.py", before, after)
    assert patch.count("\n@@ ") == 3000
    assert patch.count("\n-    total += x\n") == 3000 and patch.count("\n+    total += x.item()\n") == 3000
