"""The write side of --fix: what graphfix refuses to overwrite, what it keeps, and what it counts.

Files are changed "during the run" through a hook between analysis and write (the engine's
process_source), so each race is deterministic; the CLI runs in-process with -j 1 for the same reason."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

import fixer.engine as engine
from fixer import cli
from fixer.engine import Options, process_file
from fixer.registry import all_rules
from tests.test_cli import BUGGY, FIXED

OPTIONS = Options(rules=tuple(all_rules()), fix=True, unsafe=True, write=True)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


@pytest.fixture
def buggy(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(BUGGY)
    return path


def during_analysis(monkeypatch, action) -> None:
    """Run ``action(path)`` after the file was read and analysed, before the fix is written."""
    analyse = engine.process_source

    def hooked(path, *args, **kwargs):
        result = analyse(path, *args, **kwargs)
        action(Path(path))
        return result

    monkeypatch.setattr(engine, "process_source", hooked)


def temp_files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".graphfix-")]


def run_cli(capsys, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--fix", "-j", "1", *args])
    return exit_.value.code, capsys.readouterr().err


# D3: a file changed while being fixed


def test_a_change_made_during_the_run_is_not_overwritten(buggy, monkeypatch):
    during_analysis(monkeypatch, lambda path: path.write_text(BUGGY + "# user edit\n"))
    result = process_file(str(buggy), OPTIONS)
    assert result.errors == ["changed while being fixed; not written"]
    assert buggy.read_text() == BUGGY + "# user edit\n"
    assert not result.written and not result.changed and result.remaining == result.diagnostics
    assert temp_files(buggy.parent) == []


def test_a_file_already_fixed_by_someone_else_is_left_alone_without_error(buggy, monkeypatch):
    during_analysis(monkeypatch, lambda path: path.write_text(FIXED))
    result = process_file(str(buggy), OPTIONS)
    assert (result.errors, result.written, result.changed) == ([], False, False)
    assert buggy.read_text() == FIXED and temp_files(buggy.parent) == []


def test_cli_reports_the_change_and_fixes_nothing(buggy, monkeypatch, capsys):
    during_analysis(monkeypatch, lambda path: path.write_text(BUGGY + "# user edit\n"))
    code, err = run_cli(capsys, str(buggy))
    assert code == 123
    assert f"{buggy}: error: changed while being fixed; not written" in err
    assert "fixed 0 file(s); 1 finding(s) remaining" in err


# D17: only files actually written are counted


def test_a_file_deleted_during_the_run_is_not_counted(tmp_path, monkeypatch, capsys):
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(BUGGY)
    during_analysis(monkeypatch, lambda path: path.unlink() if path.name == "a.py" else None)
    code, err = run_cli(capsys, str(tmp_path))
    assert code == 123 and "a.py: error: deleted while being fixed; not written" in err
    assert "fixed 1 file(s); 1 finding(s) remaining" in err
    assert not (tmp_path / "a.py").exists() and (tmp_path / "b.py").read_text() == FIXED
    assert temp_files(tmp_path) == []


def test_exit_non_zero_on_fix_ignores_unwritten_fixes(buggy, monkeypatch, capsys):
    during_analysis(monkeypatch, lambda path: path.write_text(FIXED))  # a concurrent run won
    code, err = run_cli(capsys, "--exit-non-zero-on-fix", str(buggy))
    assert code == 0 and "fixed 0 file(s); 0 finding(s) remaining" in err


# D5: files the rename would wrong


def test_a_read_only_file_is_refused(buggy, capsys):
    buggy.chmod(0o444)  # refused even as root, whom os.access lets write
    code, err = run_cli(capsys, str(buggy))
    assert code == 123 and "error: cannot write: read-only file; not fixed" in err
    assert "fixed 0 file(s); 1 finding(s) remaining" in err
    assert buggy.read_text() == BUGGY and stat.S_IMODE(buggy.stat().st_mode) == 0o444


def test_a_file_the_user_may_not_write_is_refused(buggy, monkeypatch):
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: mode != os.W_OK)  # a 0644 file of another user
    result = process_file(str(buggy), OPTIONS)
    assert result.errors == ["cannot write: read-only file; not fixed"] and buggy.read_text() == BUGGY


@as_root
def test_owner_group_and_mode_are_kept(buggy):
    os.chown(buggy, 65534, 65534)
    buggy.chmod(0o640)
    result = process_file(str(buggy), OPTIONS)
    assert result.written and buggy.read_text() == FIXED
    info = buggy.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (65534, 65534, 0o640)


def test_an_owner_that_cannot_be_kept_is_refused(buggy, monkeypatch):
    def not_root(fd, uid, gid):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "fchown", not_root)
    real_fstat = os.fstat

    def other_owner(fd):  # every descriptor seems owned by uid/gid 4242 (the temp file's too)
        real = real_fstat(fd)
        return os.stat_result(tuple(real[:4]) + (4242, 4242) + tuple(real[6:10]))

    monkeypatch.setattr(os, "fstat", other_owner)
    info = buggy.stat()
    result = process_file(str(buggy), OPTIONS)
    owner = f"owned by uid {info.st_uid} gid {info.st_gid}, which the rewritten file cannot keep; not fixed"
    assert result.errors == [f"cannot write: {owner}"]
    assert buggy.read_text() == BUGGY and temp_files(buggy.parent) == []


def test_a_hard_linked_file_is_refused(buggy):
    other = buggy.parent / "other.py"
    os.link(buggy, other)
    result = process_file(str(buggy), OPTIONS)
    assert result.errors == ["has 2 hard links; not fixed, the atomic rename would split them"]
    assert buggy.read_text() == other.read_text() == BUGGY and os.path.samefile(buggy, other)


def test_no_temp_file_is_left_when_the_rename_fails(buggy, monkeypatch):
    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    result = process_file(str(buggy), OPTIONS)
    assert result.errors == ["cannot write: No space left on device; not fixed"]
    assert buggy.read_text() == BUGGY and temp_files(buggy.parent) == []


def test_the_temp_file_is_on_disk_before_the_rename(buggy, monkeypatch):
    synced, replace = [], os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")))
    monkeypatch.setattr(os, "replace", lambda src, dst: (synced.append("rename"), replace(src, dst)))
    assert process_file(str(buggy), OPTIONS).written
    assert len(synced) == 2 and ".graphfix-" in synced[0] and synced[1] == "rename"


# temporary files a killed run left behind (tests/test_interrupt.py provokes them for real)


def test_the_next_write_removes_temp_files_of_dead_runs_only(buggy):
    stale = buggy.parent / f".graphfix-{_a_dead_pid()}-abc123.tmp"
    live = buggy.parent / f".graphfix-{os.getppid()}-abc123.tmp"  # a running process: perhaps a concurrent run
    other = buggy.parent / ".graphfix-notes.tmp"  # not a name graphfix gives
    for path in (stale, live, other):
        path.write_text("partial")
    assert process_file(str(buggy), OPTIONS).written
    assert sorted(temp_files(buggy.parent)) == sorted([live.name, other.name])


def _a_dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid
