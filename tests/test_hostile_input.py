"""Regression tests for the hostile-test report (shared/reports/reliability-2026-11-23.md): odd
bytes, deep code, bad configs, odd names and the editor's stdin contract. Each test names the
defect it keeps out."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fixer.apply import select_fixes
from fixer.engine import Options, process_source
from fixer.registry import all_rules
from fixer.rule import Applicability, Diagnostic, Edit, Fix
from fixer.runner import run

ROOT = Path(__file__).resolve().parent.parent
GOOD = """import torch


def train(model, loader, optimizer):
    running_loss = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        running_loss += loss
    return running_loss
"""
GOOD_FIXED = GOOD.replace("running_loss += loss\n", "running_loss += loss.item()\n")
# a call with a module, data and an optimizer: what makes them so to the analysis (not their names)
CALLED = "\n\nnet = torch.nn.Linear(3, 1)\ntrain(net, [torch.randn(2, 3)], torch.optim.SGD(net.parameters(), lr=0.1))\n"


def graphfix(*args: str, cwd: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "fixer", *args], cwd=cwd, input=stdin, capture_output=True, env=env, timeout=120
    )


def fix(text: str, **options) -> tuple[str, list[str]]:
    result = process_source("t.py", text.encode("utf-8"), Options(rules=all_rules(), fix=True, unsafe=True, **options))
    return (result.fixed if result.changed else text), result.errors


# --- D1, D9: characters str.splitlines() breaks at and Python does not -------------------------


def test_form_feed_before_a_safe_fix_does_not_move_it(tmp_path):
    """D1: with a page break above, --fix deleted `loss.backward(...)` with exit 0."""
    body = "    for x in batches:\n        optimizer.zero_grad()\n        loss = model(x).sum()\n        loss.backward({})\n        optimizer.step()\n"
    source = "import torch\n\x0c\ndef train(model, batches, optimizer):\n" + body.format("retain_graph=True") + CALLED
    (tmp_path / "ff.py").write_bytes(source.encode())
    out = graphfix("--fix", "ff.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "ff.py").read_bytes().decode() == source.replace("retain_graph=True", "")


def test_gf302_on_a_comment_with_two_form_feeds():
    """D9: `ValueError: substring not found` in GF302."""
    source = "#\x0c\x0c\nfor x in xs:\n    opt.zero_grad()\n    l = m(x)\n    l.backward(retain_graph=True)\n    opt.step()\n"
    fixed, errors = fix(source)
    assert errors == []
    assert fixed == source.replace("retain_graph=True", "")


# --- D8: edits that collide never escape -------------------------------------------------------


def _diagnostic(line: int, *spans: tuple[int, int]) -> Diagnostic:
    edits = tuple(Edit(start, end, "x") for start, end in spans)
    return Diagnostic("GF999", "test", "m", line, 0, line, 1, Fix(edits, Applicability.SAFE))


def test_a_fix_whose_own_edits_overlap_is_never_chosen():
    own_overlap = _diagnostic(1, (0, 5), (3, 8))
    fine = _diagnostic(2, (10, 12))
    assert select_fixes([own_overlap, fine], unsafe=False) == [fine]


def test_fixes_overlapping_earlier_ones_wait_for_the_next_pass():
    first, inside, touching, same_point, point_inside = (
        _diagnostic(1, (10, 20)), _diagnostic(2, (15, 16)), _diagnostic(3, (20, 25)),
        _diagnostic(4, (30, 30)), _diagnostic(5, (12, 12)),
    )
    again = _diagnostic(6, (30, 30))
    assert select_fixes([first, inside, touching, same_point, point_inside, again], unsafe=False) == [first, touching, same_point]


def test_stdin_fix_of_a_fixture_with_a_page_break_never_crashes(tmp_path):
    """D8: `ValueError: overlapping edits` escaped as a traceback with exit 1 and an empty stdout."""
    before = (ROOT / "fixtures/fake_not_detached_for_discriminator/retain_graph_band_aid.before.py").read_text()
    source = before.replace("import", "\x0c\nimport", 1)
    out = graphfix("--unsafe-fixes", "--fix", "-", "--stdin-filename", "x.py", cwd=tmp_path, stdin=source.encode())
    assert out.returncode in (0, 1), out.stderr
    assert b"Traceback" not in out.stderr and out.stdout != source.encode()
    compile(out.stdout, "x.py", "exec")


# --- D10, D19: deep code CPython accepts, and code it does not --------------------------------


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(GOOD + "a = 1\nif a:\n    pass\n" + "".join(f"elif a{i}:\n    pass\n" for i in range(2000)), id="2000-elifs"),
        pytest.param(GOOD.replace("running_loss += loss", "running_loss += " + " + ".join(["loss"] * 2000)), id="2000-term-sum"),
        pytest.param(
            GOOD.replace("        running_loss += loss", "        if x:\n            pass\n"
                         + "".join(f"        elif x{i}:\n            pass\n" for i in range(1500)) + "        running_loss += loss"),
            id="1500-elifs-in-the-loop",
        ),
    ],
)
def test_deep_code_cpython_compiles_is_analysed(source):
    """D10: RecursionError in GF101/GF301 on files CPython compiles."""
    compile(source, "t.py", "exec")
    fixed, errors = fix(source)
    assert errors == []
    assert "running_loss += loss.item()" in fixed or "running_loss += (" in fixed


def test_code_too_deep_for_the_parser_gets_a_message():
    """D19: `cannot parse: MemoryError: ` with no explanation."""
    _, errors = fix(GOOD + "x = " + "-" * 100_000 + "1\n")
    assert len(errors) == 1 and errors[0].startswith("cannot parse:") and not errors[0].endswith(": ")


# --- R1, D18: what is not analysed is named ----------------------------------------------------


def test_a_file_over_the_size_limit_is_named_and_the_rest_fixed(tmp_path):
    """R1: a 60 MB file took 11 GB; there is now a limit, and the file is named."""
    (tmp_path / "big.py").write_text(GOOD + "DATA = [\n" + "    1,\n" * 2000 + "]\n")
    (tmp_path / "small.py").write_text(GOOD)
    out = graphfix("--fix", "--max-file-size", "8KB", ".", cwd=tmp_path)
    assert out.returncode == 123
    size = (tmp_path / "big.py").stat().st_size / 1024
    assert f"big.py: error: too large to analyse ({size:.1f} KB > max-file-size 8.0 KB); skipped" in out.stderr.decode()
    assert (tmp_path / "small.py").read_text() == GOOD_FIXED
    assert (tmp_path / "big.py").read_text().startswith(GOOD)


@pytest.mark.parametrize("bad", ["0", "lots", "-3MB"])
def test_a_bad_size_limit_is_a_usage_error(tmp_path, bad):
    out = graphfix("--max-file-size", bad, ".", cwd=tmp_path)
    assert out.returncode == 2 and b"max-file-size" in out.stderr and b"Traceback" not in out.stderr


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_utf16_files_are_named_not_skipped_silently(tmp_path, encoding):
    """D18: the byte pre-filter never saw `backward(` through UTF-16, and the run said nothing."""
    data = GOOD.encode(encoding)
    if not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        data = "\ufeff".encode(encoding) + data
    (tmp_path / "wide.py").write_bytes(data)
    out = graphfix(".", cwd=tmp_path)
    assert out.returncode == 123
    assert "wide.py: error: cannot decode: UTF-16/UTF-32" in out.stderr.decode()


# --- D11, R3: configuration and jobs ----------------------------------------------------------


@pytest.mark.parametrize(
    "config", ["tool = 1\n", "[tool]\ngraphfix = 5\n", "[tool.graphfix]\njobs = -5\n", "[tool.graphfix]\nmax-file-size = 'x'\n"]
)
def test_bad_config_gets_one_line_not_a_traceback(tmp_path, config):
    """D11: `tool = 1` crashed with a traceback and exit 1; `jobs = -5` was taken silently."""
    (tmp_path / "pyproject.toml").write_text(config)
    (tmp_path / "t.py").write_text(GOOD)
    out = graphfix("--config", "pyproject.toml", "t.py", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.decode().startswith("graphfix: error:") and b"Traceback" not in out.stderr


def test_negative_jobs_on_the_command_line_is_an_error(tmp_path):
    out = graphfix("-j", "-1", ".", cwd=tmp_path)
    assert out.returncode == 2 and b"--jobs" in out.stderr


def test_workers_never_outnumber_files(tmp_path, monkeypatch):
    """R3: -j 200 on 10 files forked 200 workers."""
    import multiprocessing

    sizes = []
    real = multiprocessing.get_context

    class Context:
        def __init__(self, method):
            self.context = real(method)

        def Pool(self, processes, **kwargs):
            sizes.append(processes)
            return self.context.Pool(processes, **kwargs)

    monkeypatch.setattr(multiprocessing, "get_context", Context)
    paths = []
    for index in range(10):
        path = tmp_path / f"t{index}.py"
        path.write_text(GOOD)
        paths.append(str(path))
    results = run(paths, Options(rules=all_rules()), jobs=200)
    assert sizes == [min(10, 4 * (os.cpu_count() or 1))]
    assert all(len(r.diagnostics) == 1 for r in results)


# --- D15, D16: output formats stay line-oriented and parseable --------------------------------

CONTINUED = """import torch


def train(model, loader, optimizer):
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
        optimizer \\
            .zero_grad()
        optimizer.step()
"""


def test_a_message_quoting_a_continued_statement_is_one_line(tmp_path):
    """D15: a statement continued with `\\` put a raw newline into the message."""
    (tmp_path / "t.py").write_text(CONTINUED)
    out = graphfix("t.py", cwd=tmp_path)
    lines = out.stdout.decode().splitlines()
    assert out.returncode == 1 and len(lines) == 1 and lines[0].startswith("t.py:8:")
    assert "optimizer .zero_grad()" in lines[0]


def test_github_annotations_escape_names_and_messages(tmp_path):
    """D15: a file named `a:1:2, x%.py` corrupted the `file=` property."""
    name = "a:1:2, x%.py"
    (tmp_path / name).write_text(GOOD)
    out = graphfix("--output-format", "github", name, cwd=tmp_path)
    line = out.stdout.decode().strip()
    properties, _, message = line.partition("::")[2].partition("::")
    assert "file=a%3A1%3A2%2C x%25.py," in properties
    assert message.startswith("a:1:2, x%25.py:11:")
    assert "\n" not in line


@pytest.mark.parametrize("name", ["tab\there.py", "new\nline.py", 'quote"d.py', "back\\slash.py", "spa ce é.py"])
def test_diff_applies_with_git_for_odd_file_names(tmp_path, name):
    """D16: `git apply` failed on names with a tab or a newline (git needs them C-quoted)."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / name).write_text(GOOD)
    out = graphfix("--diff", name, cwd=tmp_path)
    assert out.returncode == 1
    subprocess.run(["git", "apply", "-"], cwd=tmp_path, input=out.stdout, check=True)
    assert (tmp_path / name).read_text() == GOOD_FIXED


def test_json_output_of_a_continued_statement_parses(tmp_path):
    (tmp_path / "t.py").write_text(CONTINUED)
    records = json.loads(graphfix("--output-format", "json", "t.py", cwd=tmp_path).stdout)
    assert [r["code"] for r in records] == ["GF201"] and "\n" not in records[0]["message"]


# --- D2: the editor's buffer contract ---------------------------------------------------------


@pytest.mark.parametrize(
    "data", [b"x = '\xe9'\nloss.backward()\n", b"loss.backward()\x00\n", b"def f(:\n    loss.backward()\n"], ids=["latin-1", "nul", "syntax"]
)
def test_stdin_fix_echoes_the_buffer_on_any_error(tmp_path, data):
    """D2: on a decode error stdout was empty, so an editor filter wiped the buffer."""
    out = graphfix("--fix", "-", "--stdin-filename", "t.py", cwd=tmp_path, stdin=data)
    assert out.returncode == 123
    assert out.stdout == data
    assert out.stderr.decode().startswith("t.py: error:")


def test_stdin_fix_silent_keeps_stderr_empty(tmp_path):
    """D2: remaining findings went to stderr, which vim's filter puts into the buffer."""
    unsafe_only = (ROOT / "examples/seed001_double_backward.py").read_bytes()
    out = graphfix("--fix", "-", "--stdin-filename", "t.py", "--silent", cwd=tmp_path, stdin=unsafe_only)
    assert out.stderr == b""
    assert out.returncode == 1 and out.stdout == unsafe_only  # only unsafe fixes: nothing changed
    broken = graphfix("--fix", "-", "--stdin-filename", "t.py", "--silent", cwd=tmp_path, stdin=b"\xe9 backward(")
    assert broken.stderr == b"" and broken.stdout == b"\xe9 backward(" and broken.returncode == 123


def test_stdin_filename_alone_reads_stdin_and_writes_nothing(tmp_path):
    """ruff's contract: --stdin-filename means the source comes from stdin, never from disk."""
    (tmp_path / "t.py").write_text(GOOD)
    out = graphfix("--fix", "--stdin-filename", "t.py", cwd=tmp_path, stdin=GOOD.encode())
    assert out.stdout.decode() == GOOD_FIXED
    assert (tmp_path / "t.py").read_text() == GOOD


# --- D7: the Python versions we declare ------------------------------------------------------


def _interpreters() -> list[str]:
    found = []
    for version in ("3.10", "3.12", "3.13"):
        installed = sorted(Path(os.path.expanduser("~/.pyenv/versions")).glob(f"{version}.*/bin/python{version}"))
        path = installed[-1] if installed else shutil.which(f"python{version}")
        if path and "shims" in str(path):  # pyenv's shim answers only for the selected version
            path = None
        if path:
            found.append(str(path))
    return found


def test_requires_python_matches_what_is_tested():
    """D7: 3.9 was declared and crashed at import (ast.Match)."""
    text = (ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.10"' in text


ENGINE_ON_EXAMPLES = """
import hashlib
import sys
from pathlib import Path
from fixer.engine import Options, process_source
from fixer.registry import all_rules
for path in sorted(Path(sys.argv[1]).glob("*.py")):
    result = process_source(str(path), path.read_bytes(), Options(rules=all_rules(), fix=True, unsafe=True))
    assert not result.errors, result.errors
    print(path.name, [(d.line, d.code) for d in result.diagnostics], hashlib.sha256((result.fixed or "").encode()).hexdigest())
"""


@pytest.mark.parametrize("python", _interpreters() or [pytest.param(None, marks=pytest.mark.skip("no other Python here"))])
def test_engine_gives_the_same_fixes_on_every_supported_python(python):
    """The engine needs only the standard library: every supported version fixes the examples alike."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = ["-c", ENGINE_ON_EXAMPLES, str(ROOT / "examples")]
    here = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, check=True)
    there = subprocess.run([python, *args], capture_output=True, text=True, env=env)
    assert there.returncode == 0, there.stderr
    assert there.stdout == here.stdout


def test_an_internal_error_exits_2_in_one_line(tmp_path, monkeypatch, capsys):
    """A bug of ours must not exit 1 (which CI reads as "findings") with a traceback, nor 123
    (a file graphfix could not read): 2, as ruff."""
    from fixer import cli

    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(cli, "plan", broken)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["."])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == "graphfix: internal error: KeyError: 'boom' (--verbose shows the traceback)\n"


def test_a_pyproject_without_graphfix_settings_does_not_hide_the_one_above(tmp_path):
    """ecosystem report: a sub-package's pyproject.toml hid the project's [tool.graphfix]."""
    (tmp_path / "pyproject.toml").write_text('[tool.graphfix]\nignore = ["GF301"]\n')
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    (package / "t.py").write_text(GOOD)
    assert graphfix("t.py", cwd=package).returncode == 0


def test_a_deleted_statement_keeps_its_comment_at_its_indentation():
    """D23: `    loss2.backward()  # c` left `  # c`, indented by the spaces before the comment."""
    source = (ROOT / "fixtures/separate_backward_through_shared_graph/seed000_two_outputs.before.py").read_text()
    source = source.replace("  # expect: GF105", "").replace("    loss2.backward()\n", "    loss2.backward()  # the second head\n")
    fixed, errors = fix(source)
    assert errors == []
    assert "    (loss1 + loss2).backward()\n    # the second head\n" in fixed


def test_diff_fails_on_findings_that_have_no_safe_fix(tmp_path):
    """ecosystem report: `graphfix --diff` exited 0 on a file whose only findings had unsafe fixes,
    so a CI gate on it passed over real crashes."""
    (tmp_path / "t.py").write_bytes((ROOT / "examples/seed001_double_backward.py").read_bytes())
    out = graphfix("--diff", "t.py", cwd=tmp_path)
    assert out.stdout == b"" and out.returncode == 1
    assert b"finding(s) remaining" in out.stderr


RECURSIVE_HELPER = '''import torch
from torch import nn


def _apply(obj, func):
    if isinstance(obj, (list, tuple)):
        return type(obj)(_apply(el, func) for el in obj)
    if isinstance(obj, dict):
        return {k: _apply(el, func) for k, el in obj.items()}
    return func(obj)


def to_numpy(obj):
    return _apply(obj, lambda t: t.detach().cpu().numpy())


def predict(net, batches):
    preds = []
    for x in batches:
        preds.append(to_numpy(net(x)))
    return preds


def train(net, batches):
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for x in batches:
        opt.zero_grad()
        loss = net(x).pow(2).mean()
        loss.backward()
        opt.step()


model = nn.Linear(3, 1)
train(model, [torch.randn(4, 3) for _ in range(3)])
'''


def test_a_helper_that_recurses_on_the_graph_it_is_given_is_analysed():
    """poutyne 1.19's `_apply`: asking what a call returns given its arguments re-asked the same
    function for its own recursive call (inside a comprehension) until GF301 crashed with RecursionError."""
    result = process_source("t.py", RECURSIVE_HELPER.encode(), Options(rules=all_rules()))
    assert result.errors == []
