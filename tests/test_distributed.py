"""--scheduler: the batch's per-repository work on a real dask.distributed cluster (a LocalCluster of
two worker processes) gives the same output, report, patches and branches as the local run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_batch import IDENTITY
from tests.helpers import strip_markers
from tests.test_discovery import ROOT, git, graphfix, write

distributed = pytest.importorskip("distributed")

FIXTURES = ROOT / "fixtures"
REPOSITORIES = {  # name -> fixture cases copied into it (safe fixes, unsafe fixes, clean code)
    "a": ["loss_accumulated_with_graph/plain_loop.before.py", "loss_accumulated_with_graph/list_append.before.py",
          "loss_accumulated_with_graph/item_already.ok.py"],
    "b": ["repeated_backward/seed001_double_backward.before.py", "repeated_backward/grad_norm_then_backward.before.py"],
    "c": ["subgraph_built_before_loop/encoder_output_reused.before.py", "subgraph_built_before_loop/additive_only.ok.py",
          "subgraph_built_before_loop/embedding_probed_by_several_heads.before.py"],
}


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as local:
        yield local


def batch(tmp_path: Path) -> Path:
    """Three committed git repositories made of fixture files; c's config turns GF102 off in one file."""
    top = tmp_path / "repos"
    for name, cases in REPOSITORIES.items():
        write(top / name, {f"src/{Path(case).name}": strip_markers((FIXTURES / case).read_text()) for case in cases})
    write(top / "c", {"pyproject.toml": '[tool.graphfix]\nper-file-ignores = { "*embedding*" = ["GF102"] }\n'})
    for name in REPOSITORIES:
        git("init", "-q", "-b", "main", cwd=top / name)
        git("add", ".", cwd=top / name)
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start", cwd=top / name)
    return top


def run_batch(tmp_path: Path, label: str, *extra: str):
    out = graphfix("--repos-in", "repos", "--unsafe-fixes", "--patch-dir", f"patches-{label}", "--report", f"{label}.json",
                   "--branch", f"graphfix/{label}", *extra, cwd=tmp_path, env=IDENTITY)
    report = json.loads((tmp_path / f"{label}.json").read_text())
    for timed in ("created", "wall_seconds"):
        report.pop(timed)
    for repository in report["repositories"]:
        repository.pop("seconds")
        repository["outcome"] = [line.split(" (")[0] for line in repository["outcome"]]  # the branch's commit id differs
    folder = tmp_path / f"patches-{label}"
    patches = {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}
    return out, report, patches


def test_a_cluster_run_gives_the_local_run_s_output_report_patches_and_branches(tmp_path, cluster):
    top = batch(tmp_path)
    local, local_report, local_patches = run_batch(tmp_path, "local")
    remote, remote_report, remote_patches = run_batch(tmp_path, "cluster", "--scheduler", cluster.scheduler_address)
    assert local.returncode == remote.returncode == 1, remote
    assert remote.stdout == local.stdout and remote.stdout.count(b"== repos/") == 3
    assert remote_report == {**local_report, "repositories": [
        {**r, "outcome": [o.replace("graphfix/local", "graphfix/cluster") for o in r["outcome"]]} for r in local_report["repositories"]
    ]}
    assert local_report["fixes_applied"] > 0 and len(local_patches) == 3
    assert local_report["repositories"][2]["files_changed"] == ["src/encoder_output_reused.before.py"]  # c's config held
    assert remote_patches == local_patches and sorted(local_patches) == ["a.patch", "b.patch", "c.patch"]
    for name in REPOSITORIES:  # the same fixed files on both branches, the checkout untouched
        trees = [git("rev-parse", f"graphfix/{label}^{{tree}}", cwd=top / name) for label in ("local", "cluster")]
        assert trees[0] == trees[1] != git("rev-parse", "main^{tree}", cwd=top / name)
        assert git("status", "--porcelain", cwd=top / name) == ""


def test_a_scheduler_file_and_fix_in_place(tmp_path, cluster):
    top = batch(tmp_path)
    (tmp_path / "scheduler.json").write_text(json.dumps({"address": cluster.scheduler_address}))
    out = graphfix("--repos-in", "repos", "--fix", "--unsafe-fixes", "--scheduler", "scheduler.json", cwd=tmp_path)
    assert out.returncode == 0, out  # the workers wrote the fixes: nothing remains
    for name, cases in REPOSITORIES.items():
        for case in cases:
            kept = "embedding" in case  # c's config turns its rule off there
            expected = strip_markers((FIXTURES / (case if kept else case.replace(".before.py", ".after.py"))).read_text())
            assert (top / name / "src" / Path(case).name).read_text() == expected, case
    assert b"in 3 repositories" in out.stderr


def test_an_unreachable_scheduler_or_a_bad_address_is_a_usage_error(tmp_path):
    batch(tmp_path)
    env = {"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"}
    out = graphfix("--repos-in", "repos", "--scheduler", "tcp://127.0.0.1:9", cwd=tmp_path, env=env)
    assert out.returncode == 2 and b"cannot reach the scheduler at tcp://127.0.0.1:9" in out.stderr, out
    assert out.stdout == b""
    out = graphfix("--repos-in", "repos", "--scheduler", "nowhere.json", cwd=tmp_path)
    assert out.returncode == 2 and b"neither an address (tcp://host:port) nor a readable scheduler file" in out.stderr, out
    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp://", dashboard_address=":0") as empty:
        out = graphfix("--repos-in", "repos", "--scheduler", empty.scheduler_address, cwd=tmp_path)
    assert out.returncode == 2 and b"no worker is connected" in out.stderr, out
    (tmp_path / "empty.json").write_text("{}")
    out = graphfix("--repos-in", "repos", "--scheduler", "empty.json", cwd=tmp_path)
    assert out.returncode == 2 and b"the scheduler file gives no address" in out.stderr, out


def test_without_the_extra_the_flag_says_what_to_install(tmp_path):
    batch(tmp_path)
    blocked = "import sys; sys.modules['distributed'] = None; from fixer.cli import main; main(sys.argv[1:])"
    out = subprocess.run([sys.executable, "-c", blocked, "--repos-in", "repos", "--scheduler", "tcp://127.0.0.1:9"], cwd=tmp_path,
                         capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=30)
    assert out.returncode == 2, out
    assert b"--scheduler needs dask.distributed, which is not installed: pip install 'graphfix[distributed]'" in out.stderr


def failing_task(*args):
    raise RuntimeError("worker lost")


def test_a_task_the_cluster_loses_is_an_error_for_its_files_only(tmp_path, cluster, monkeypatch):
    from fixer.batch import distributed as remote
    from fixer.batch.units import repositories
    from fixer.batch.work import plan
    from fixer.hierarchy import ConfigTree, Flags

    top = batch(tmp_path)
    repos = repositories([str(top / "a"), str(top / "b")], [], [])
    work = plan([], repos, ConfigTree(Flags()), [], True)
    with distributed.Client(cluster.scheduler_address, set_as_default=False) as client:
        good = remote.run_on_cluster(client, work)
        monkeypatch.setattr(remote, "check_repository", failing_task)
        lost = remote.run_on_cluster(client, work)
    assert [r.path for r in good] == [r.path for r in lost] == work.files
    assert all(not r.errors for r in good) and sum(len(r.diagnostics) for r in good) > 0
    assert all(r.errors == ["not checked: the cluster lost its repository's task (RuntimeError: worker lost)"] for r in lost)
    assert not any(r.internal for r in lost)  # exit 123: files not checked, not a bug of graphfix
