"""``graphfix run`` as a command: exit codes, bad input, --max-steps, -m, JSON, DataLoader
workers, CUDA; the ``graphfix.watch()`` API; and static graphfix never importing torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def graphfix_run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "fixer", "run", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180)


def program(tmp_path: Path, text: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_static_graphfix_and_the_api_import_no_torch() -> None:
    code = "import sys, fixer.cli, fixer.runtime, graphfix; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_missing_script_is_graphfix_error(tmp_path: Path) -> None:
    result = graphfix_run(str(tmp_path / "nope.py"))
    assert result.returncode == 123
    assert "nope.py: no such file" in result.stderr and "Traceback" not in result.stderr


def test_missing_module_is_graphfix_error(tmp_path: Path) -> None:
    result = graphfix_run("-m", "no_such_module_here", cwd=tmp_path)
    assert result.returncode == 123 and "no module named 'no_such_module_here'" in result.stderr


def test_torch_missing_says_so(monkeypatch, capsys) -> None:
    from fixer.runtime.command import main

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    assert main([str(EXAMPLES / "seed002_reused_subgraph.py")]) == 123
    assert "graphfix run needs PyTorch" in capsys.readouterr().err


torch = pytest.importorskip("torch", reason="graphfix run executes programs, which need torch")

from tests.sanitized import sanitize  # noqa: E402 (needs torch)


def test_unrelated_error_is_the_programs_own(tmp_path: Path) -> None:
    path = program(tmp_path, """\
        import torch
        def load():
            raise ValueError("no data here")
        load()
    """)
    result = sanitize(str(path), ("--lr", "1"))
    assert (result.exit_code, result.findings) == (1, ())
    assert f'File "{path}", line 3, in load' in result.output and "ValueError: no data here" in result.output
    assert "fixer" not in result.output  # no frame of graphfix's own


def test_sys_exit_code_is_kept_and_argv_is_the_programs(tmp_path: Path) -> None:
    path = program(tmp_path, "import sys, torch\nsys.exit(len(sys.argv) + 1)\n")
    assert sanitize(str(path), ("a", "--max-steps", "b")).exit_code == 5


def test_max_steps_stops_cleanly_and_json_is_a_list(tmp_path: Path) -> None:
    path = program(tmp_path, """\
        import torch
        w = torch.zeros(3, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.1)
        for step in range(10_000):
            opt.zero_grad()
            (w - 1).pow(2).sum().backward()
            opt.step()
            print(step)
    """)
    result = graphfix_run("--max-steps", "3", "--output-format", "json", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[]"]  # JSON on stdout: the program's prints went to stderr
    assert "0\n1\n" in result.stderr  # the third step stops before its print
    assert "stopped after 3 optimizer step(s)" in result.stderr


def test_module_with_dataloader_workers_is_diagnosed(tmp_path: Path) -> None:
    program(tmp_path, """\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        if __name__ == "__main__":
            loader = DataLoader(TensorDataset(torch.randn(16, 3)), batch_size=4, num_workers=2)
            layer = torch.nn.Linear(3, 3)
            scale = layer(torch.ones(3))
            for (x,) in loader:
                loss = (x * scale).sum()
                loss.backward()
    """, name="loader_job.py")
    result = graphfix_run("--output-format", "json", "-m", "loader_job", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    [finding] = json.loads(result.stdout)
    assert (finding["code"], finding["location"]["row"]) == ("GF102", 7)
    roles = {piece["role"]: piece["line"] for piece in finding["evidence"]}
    assert roles["freed by"] == 10 and roles["used again"] == 9 and roles["failed"] == 10


def test_inplace_change_by_a_step_names_parameter_step_and_backward(tmp_path: Path) -> None:
    path = program(tmp_path, """\
        import torch
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(4, 3)
        out = model(x)
        for step in range(2):
            loss = out.pow(2).mean()
            opt.zero_grad()
            loss.backward(retain_graph=True)
            opt.step()
    """)
    from fixer.runtime.launcher import execute

    outcome = execute(str(path), [])
    [finding] = outcome.findings
    assert (finding.code, finding.line) == ("GF102", 5)
    assert finding.message.startswith("parameter `model.2.weight` (1, 4)"), finding.message
    roles = {piece.role: piece.line for piece in finding.evidence}
    assert roles["graph kept by"] == 9 and roles["changed by"] == 10 and roles["failed"] == 9


def test_watch_reports_and_keeps_the_programs_error(capsys) -> None:
    import graphfix

    w = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="second time"):
        with graphfix.watch() as session:
            hidden = (w * w).exp()
            for _ in range(2):
                hidden.sum().backward()
    assert [f.code for f in session.findings] == ["GF102"]
    assert "GF102" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_program_is_diagnosed(tmp_path: Path) -> None:
    path = program(tmp_path, """\
        import torch
        w = torch.ones(3, device="cuda", requires_grad=True)
        h = (w * 2).exp()
        for _ in range(2):
            (h * 3).sum().backward()
    """)
    result = graphfix_run(str(path))
    assert result.returncode == 1 and f"{path}:3:1: GF102" in result.stdout


@pytest.mark.parametrize(
    "name, code, line",
    [("seed000_two_losses", "GF105", 36), ("seed001_double_backward", "GF106", 26), ("seed002_reused_subgraph", "GF102", 14), ("seed003_cached_hidden", "GF101", 22), ("seed004_zero_grad_order", "GF106", 43)],
)
def test_seed_programs_are_diagnosed_where_static_graphfix_reports(name: str, code: str, line: int) -> None:
    result = sanitize(str(EXAMPLES / f"{name}.py"))
    assert result.exit_code == 1 and result.findings[0][:2] == (code, line), result.findings


def test_a_torch_function_mode_of_the_programs_own_is_left_working(tmp_path: Path) -> None:
    path = program(tmp_path, """\
        import torch
        from torch.overrides import TorchFunctionMode

        class Counting(TorchFunctionMode):
            calls = 0
            def __torch_function__(self, func, types, args=(), kwargs=None):
                Counting.calls += 1
                return func(*args, **(kwargs or {}))

        w = torch.ones(3, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.1)
        with Counting():
            for _ in range(2):
                opt.zero_grad()
                (w * 2).sum().backward()
                opt.step()
        assert Counting.calls > 0 and torch.overrides._get_current_function_mode() is not None
        hidden = (w * w).exp()
        for _ in range(2):
            hidden.sum().backward()
    """)
    result = sanitize(str(path))
    assert [f[:2] for f in result.findings] == [("GF102", 18)], result.output


def test_diff_shows_the_static_rules_fix_where_it_reports_the_same_line(capsys) -> None:
    from fixer.runtime.command import main

    assert main(["--diff", str(EXAMPLES / "seed002_reused_subgraph.py")]) == 1
    out = capsys.readouterr().out
    assert "seed002_reused_subgraph.py:14:1: GF102" in out
    assert "--- a/" in out and "+++ b/" in out and "-projected = transform @ offset" in out.replace("  # built once, outside the loop", "")


def test_a_session_leaves_torch_as_it_found_it() -> None:
    from fixer.runtime.session import Session

    before = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad, torch.optim.Optimizer.zero_grad)
    w = torch.ones(2, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    with Session():
        opt.zero_grad()
        (w * 2).sum().backward()
        opt.step()
    after = (torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad, torch.optim.Optimizer.zero_grad)
    assert after == before and torch.overrides._get_current_function_mode() is None
    assert torch.allclose(w, torch.full((2,), 0.8))  # the step ran on the real gradient
