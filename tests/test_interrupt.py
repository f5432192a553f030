"""kill -9 of a --fix run at random moments leaves every file either as it was or fully fixed;
a temporary file it leaves is removed by the next run that writes into its folder.

The tree is the fixtures' buggy files (markers stripped) plus the clean ones. A full run
on a copy gives the fixed version of every file and the run's duration; each trial then restores the
tree, starts --fix in its own process group and kills, after a seeded random share of that duration,
either the whole group (main process and pool workers) or the main process alone. Set
GRAPHFIX_INTERRUPT_TRIALS for a longer run."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import strip_markers

ROOT = Path(__file__).resolve().parent.parent
TRIALS = int(os.environ.get("GRAPHFIX_INTERRUPT_TRIALS", "6"))
COPIES = 1

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds the pool workers in /proc")


def original_tree() -> dict[str, bytes]:
    files = {}
    for copy in range(COPIES):
        for path in sorted(ROOT.glob("fixtures/*/*.before.py")):
            files[f"bug{copy}/{path.parent.name}/{path.name}"] = strip_markers(path.read_text()).encode()
    for path in sorted(ROOT.glob("fixtures/*/*.ok.py")):
        files[f"clean/{path.parent.name}/{path.name}"] = path.read_bytes()
    return files


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        with contextlib.suppress(FileNotFoundError):
            (root / name).unlink()  # new files: truncating ext4 files forces a slow flush
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)


def read_tree(root: Path, files: dict[str, bytes]) -> dict[str, bytes]:
    return {name: (root / name).read_bytes() for name in files}


def start_fix(root: Path) -> subprocess.Popen:
    return start_fix_paths([root])


def start_fix_paths(paths: list[Path]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "fixer", "--fix", "--unsafe-fixes", "--jobs", "2", *map(str, paths)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )


def live_members(group: int) -> list[int]:
    """Processes of ``group`` that have not exited (zombies waiting for init do not count)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == group:
            pids.append(int(entry))
    return pids


def wait_until_gone(group: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while live_members(group):
        if time.monotonic() > deadline:  # orphaned workers would keep writing while we look
            os.killpg(group, signal.SIGKILL)
            pytest.fail(f"pool workers still alive {timeout} s after their main process was killed")
        time.sleep(0.05)


def test_kill_9_leaves_each_file_old_or_fully_fixed(tmp_path):
    originals = original_tree()
    reference = tmp_path / "reference"
    write_tree(reference, originals)
    began = time.monotonic()
    assert start_fix(reference).wait(timeout=120) == 0
    duration = time.monotonic() - began
    fixed = read_tree(reference, originals)
    to_fix = sum(fixed[name] != originals[name] for name in originals)
    assert 0 < to_fix < len(originals)

    rng = random.Random(20261123)
    tree = tmp_path / "tree"
    outcomes: list[tuple] = []
    left: set[Path] = set()
    for trial in range(TRIALS):
        write_tree(tree, originals)
        whole_group = trial % 2 == 0
        delay = rng.uniform(0.1, 0.6) * duration
        process = start_fix(tree)
        time.sleep(delay)
        if whole_group:
            os.killpg(process.pid, signal.SIGKILL)
        else:
            os.kill(process.pid, signal.SIGKILL)
        process.wait()
        wait_until_gone(process.pid)
        now = read_tree(tree, originals)
        torn = [name for name in originals if now[name] not in (originals[name], fixed[name])]
        leftovers = set(tree.rglob(".graphfix-*.tmp")) - left  # earlier ones stay until their folder is written
        left |= leftovers
        done = sum(now[name] == fixed[name] != originals[name] for name in originals)
        outcomes.append(("group" if whole_group else "main", round(delay, 2), done, len(leftovers)))
        assert not torn, f"trial {trial}: files neither original nor fixed: {torn[:5]}"
    print(f"\n{len(originals)} files, {to_fix} to fix, full run {duration:.1f} s; "
          f"(kill, after s, files fixed, temp files left): {outcomes}")
    assert any(0 < done < to_fix for _, _, done, _ in outcomes), f"no kill landed mid-run: {outcomes}"

    # the next run that writes into a folder removes what killed runs left there
    write_tree(tree, originals)
    folders = sorted({path.parent for path in tree.rglob(".graphfix-*.tmp")})
    if folders:
        assert start_fix_paths(folders).wait(timeout=120) == 0
    assert list(tree.rglob(".graphfix-*")) == []
