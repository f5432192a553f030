"""Jupyter notebooks: every fixture program split into cells is found and fixed exactly as the
program is, the JSON outside the changed sources stays byte-identical, IPython syntax is
understood, and the CLI's contracts (--diff, stdin, write safety, bad input) hold for notebooks."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from fixer.engine import Options, process_file, process_source
from fixer.magics import neutralise
from fixer.registry import all_rules
from tests.fixture_cases import discover
from tests.helpers import expected_markers, rule_for_module, strip_markers
from tests.test_cli import graphfix
from tests.test_write_safety import during_analysis

CASES = discover()
BEFORE = [c for c in CASES if c.before]
OK = [c for c in CASES if c.ok]
ALL = Options(rules=tuple(all_rules()), fix=True, unsafe=True)


def split_cells(program: str) -> list[str]:
    """One cell per top-level statement (with the comments above it), without the final line
    break as Jupyter stores a cell (kept where blank lines follow, so the cells join back exactly)."""
    lines = program.splitlines(True)
    starts = sorted({min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])]) for s in ast.parse(program).body})
    cuts = [0] + [start - 1 for start in starts[1:]] + [len(lines)]
    cells = ["".join(lines[a:b]) for a, b in zip(cuts, cuts[1:]) if b > a]
    return [cell[:-1] if cell.endswith("\n") and not cell.endswith("\n\n") else cell for cell in cells]


def notebook(cells: list[str], indent: int = 1, sort_keys: bool = True, ascii_only: bool = False) -> str:
    """A notebook as Jupyter writes it (indent 1, sorted keys, raw UTF-8, final newline), with a
    markdown cell first and after every second code cell, and outputs on every code cell."""
    raw: list[dict] = [{"cell_type": "markdown", "metadata": {}, "source": ["# Training\n", "notes"]}]
    for index, source in enumerate(cells):
        raw.append({
            "cell_type": "code", "execution_count": index + 1, "id": f"c{index}", "metadata": {"tags": []},
            "outputs": [{"name": "stdout", "output_type": "stream", "text": ["epoch 0 loss 0.25\n"]}],
            "source": source.splitlines(True),
        })
        if index % 2:
            raw.append({"cell_type": "markdown", "id": f"m{index}", "metadata": {}, "source": "text"})
    document = {
        "nbformat_minor": 5, "nbformat": 4, "cells": raw,
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
    }
    return json.dumps(document, indent=indent, sort_keys=sort_keys, ensure_ascii=ascii_only) + "\n"


def code_cells(text: str) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "code"]


def program_of(cells: list[str]) -> str:
    return "".join(cell if cell.endswith(("\n", "\r")) or not cell else cell + "\n" for cell in cells)


def without_code(text: str) -> dict:
    document = json.loads(text)
    for cell in document["cells"]:
        if cell["cell_type"] == "code":
            cell["source"] = None
    return document


def global_lines(text: str, diagnostics) -> list[tuple[int, str]]:
    """(line in the whole program, code) of notebook diagnostics."""
    document, offset, first_line = json.loads(text), 0, {}
    for number, cell in enumerate(document["cells"], start=1):
        if cell["cell_type"] == "code":
            first_line[number] = offset
            offset += len(program_of(["".join(cell["source"])]).splitlines())
    return sorted((first_line[d.cell] + d.line, d.code) for d in diagnostics)


@pytest.mark.parametrize("case", BEFORE, ids=[c.id for c in BEFORE])
def test_a_fixture_split_into_cells_is_fixed_as_the_program_is(case):
    source = case.before.read_text(encoding="utf-8")
    text = notebook(split_cells(source))
    path = str(case.before.with_name(case.name + ".ipynb"))
    result = process_source(path, text.encode(), Options(rules=(rule_for_module(case.rule_module),), fix=True, unsafe=True))
    assert not result.errors, result.errors
    assert global_lines(text, result.diagnostics) == expected_markers(source)
    assert result.changed
    assert strip_markers(program_of(code_cells(result.fixed))) == case.after.read_text(encoding="utf-8")
    assert without_code(result.fixed) == without_code(text)
    # written as Jupyter writes it: the splice changed nothing but the sources
    assert result.fixed == json.dumps(json.loads(result.fixed), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("case", OK, ids=[c.id for c in OK])
def test_correct_code_in_cells_is_left_alone(case):
    text = notebook(split_cells(case.ok.read_text(encoding="utf-8")))
    result = process_source(str(case.ok.with_name(case.name + ".ipynb")), text.encode(), ALL)
    assert (result.errors, result.diagnostics, result.changed) == ([], [], False)


LOOP = "for step in range(3):\n    loss = (w * x).sum()\n    loss.backward()\n    total_loss += loss"
SETUP = "import torch\nw = torch.randn(3, requires_grad=True)\nx = torch.randn(3)\ntotal_loss = 0"
MAGIC_CELLS = [
    "%matplotlib inline\n!pip install torch\nfiles = !ls\n" + SETUP,
    "%%bash\necho $((1 + 1)) 'not python'",
    "torch.manual_seed?\n?torch.randn\n%time y = w * 2\nif True:\n    %timeit -n 1 \\\n        w + 1\n" + "print('is this?')  # why?",
    "%%time\n" + LOOP,
]


def test_magics_are_neutralised_and_kept_byte_identical():
    text = notebook(MAGIC_CELLS)
    result = process_source("nb.ipynb", text.encode(), ALL)
    assert result.errors == []
    # cell 1 is markdown, cell 4 markdown; the %%bash cell 3 is no Python; the loop is cell 6
    assert [(d.cell, d.line, d.col, d.code) for d in result.diagnostics] == [(6, 5, 4, "GF301")]
    cells = code_cells(result.fixed)
    assert cells[:3] == MAGIC_CELLS[:3]
    assert cells[3] == "%%time\n" + LOOP.replace("+= loss", "+= loss.item()")
    assert [cell for cell, _, _ in result.cells] == [6]


def test_a_loop_in_one_cell_and_the_backward_in_the_next_are_one_program():
    cells = ["import torch\nw = torch.randn(3, requires_grad=True)\ny = w * 2", "for i in range(3):\n    y.sum().backward()"]
    result = process_source("nb.ipynb", notebook(cells).encode(), ALL)
    assert [(d.cell, d.code) for d in result.diagnostics] == [(2, "GF102")]
    assert result.errors == []


def test_a_notebook_no_fix_applies_to_round_trips_byte_identical(tmp_path):
    path = tmp_path / "clean.ipynb"
    text = notebook(["import torch", "# café ☕\nprint('naïve')\r\nx = 1"])
    path.write_text(text, encoding="utf-8", newline="")
    run = graphfix("--fix", str(path), cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert path.read_bytes() == text.encode("utf-8")


@pytest.mark.parametrize("indent, sort_keys, ascii_only", [(1, True, False), (2, False, False), (4, True, True), (None, False, False)])
def test_the_json_formatting_is_kept_outside_the_changed_source(indent, sort_keys, ascii_only):
    cells = [SETUP + "\nlabel = 'café'", LOOP.replace("loss.backward()", "loss.backward()  # naïve")]
    text = notebook(cells, indent=indent, sort_keys=sort_keys, ascii_only=ascii_only)
    result = process_source("nb.ipynb", text.encode(), ALL)
    expected = notebook([cells[0], cells[1].replace("+= loss", "+= loss.item()")], indent, sort_keys, ascii_only)
    assert result.fixed == expected


def test_crlf_and_non_ascii_inside_sources_are_kept():
    cells = [SETUP.replace("\n", "\r\n") + "\r\nname = 'ünïcode ✓'", LOOP.replace("\n", "\r\n") + "\r\n"]
    result = process_source("nb.ipynb", notebook(cells).encode(), ALL)
    assert code_cells(result.fixed) == [cells[0], cells[1].replace("+= loss", "+= loss.item()")]


def test_a_fix_inserting_lines_keeps_the_cells_newline_style():
    cells = [SETUP.replace("\n", "\r\n"), "for i in range(3):\r\n    loss = (w * x).sum()\r\n    loss.backward(retain_graph=True)\r\n"]
    result = process_source("nb.ipynb", notebook(cells).encode(), ALL)
    for cell in code_cells(result.fixed):
        assert "\n" not in cell.replace("\r\n", "")


@pytest.fixture
def leak(tmp_path: Path) -> Path:
    path = tmp_path / "leak.ipynb"
    path.write_text(notebook([SETUP, LOOP]), encoding="utf-8")
    return path


def test_fix_in_place_diff_per_cell_and_report_by_cell(leak):
    report = graphfix(str(leak), cwd=leak.parent)
    assert report.returncode == 1
    assert report.stdout.decode() == "leak.ipynb:cell 3:4:5: GF301 [*] `total_loss` accumulates `loss` with its autograd graph, keeping every iteration's graph alive; accumulate `loss.item()`\n"
    diff = graphfix("--diff", ".", cwd=leak.parent)
    assert diff.stdout.decode().startswith("--- leak.ipynb:cell 3\n+++ leak.ipynb:cell 3\n@@ -1,4 +1,4 @@\n")
    assert "+    total_loss += loss.item()\n" in diff.stdout.decode()
    fixed = graphfix("--fix", ".", cwd=leak.parent)
    assert fixed.returncode == 0, fixed.stderr
    assert leak.read_text(encoding="utf-8") == notebook([SETUP, LOOP.replace("+= loss", "+= loss.item()")])


def test_stdin_with_a_notebook_name_reads_and_writes_notebook_json(leak):
    data = leak.read_bytes()
    fixed = graphfix("--fix", "--stdin-filename", "x.ipynb", "--silent", cwd=leak.parent, stdin=data)
    assert fixed.stdout.decode() == notebook([SETUP, LOOP.replace("+= loss", "+= loss.item()")])
    assert leak.read_bytes() == data
    report = graphfix("--stdin-filename", "x.ipynb", cwd=leak.parent, stdin=data)
    assert report.stdout.decode().startswith("x.ipynb:cell 3:4:5: GF301")
    broken = graphfix("--fix", "--stdin-filename", "x.ipynb", cwd=leak.parent, stdin=b"{not json")
    assert (broken.returncode, broken.stdout) == (123, b"{not json")


def test_a_notebook_changed_during_the_run_is_not_overwritten(leak, monkeypatch):
    edited = leak.read_text(encoding="utf-8").replace('"metadata": {}', '"metadata": {"edited": true}', 1)
    during_analysis(monkeypatch, lambda path: path.write_text(edited, encoding="utf-8"))
    result = process_file(str(leak), Options(rules=tuple(all_rules()), fix=True, unsafe=True, write=True))
    assert result.errors == ["changed while being fixed; not written"]
    assert leak.read_text(encoding="utf-8") == edited and not result.written


def test_a_notebook_is_written_through_a_temporary_file_renamed_over_it(leak, monkeypatch):
    import fixer.source as source_module

    renamed = []
    rename = source_module.os.replace

    def spy(temp, target):
        renamed.append((Path(temp).parent, Path(temp).name, Path(target), Path(temp).read_bytes()))
        rename(temp, target)

    monkeypatch.setattr(source_module.os, "replace", spy)
    result = process_file(str(leak), Options(rules=tuple(all_rules()), fix=True, unsafe=True, write=True))
    [(folder, temp, target, data)] = renamed
    assert result.written and folder == leak.parent and temp.startswith(".graphfix-")
    assert target == leak and data == leak.read_bytes() == result.fixed.encode("utf-8")


@pytest.mark.parametrize("content, message", [
    (b"{not json", "cannot read notebook: invalid JSON"),
    (b'{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}', "cannot read notebook: nbformat 3 is not supported"),
    (b'{"nbformat": 4, "metadata": {}}', "cannot read notebook: no `cells` list"),
    (b'[1, 2]', "cannot read notebook: the JSON document is not an object"),
    (b'{"cells": ' + b"[" * 5000 + b"]" * 5000 + b"}", "cannot read notebook: invalid JSON"),  # was RecursionError, exit 2
    (b'{"nbformat": 4, "cells": [], "n": ' + b"9" * 5000 + b"}", "cannot read notebook: invalid JSON"),  # int digit limit
    (b'{"nbformat": 5, "nbformat_minor": 0, "cells": []}', "cannot read notebook: nbformat 5 is not supported"),
    (b'{"nbformat": "4", "nbformat_minor": 0, "cells": []}', 'cannot read notebook: nbformat "4" is not supported'),
])
def test_a_malformed_notebook_is_named_and_the_run_goes_on(tmp_path, content, message):
    (tmp_path / "bad.ipynb").write_bytes(content)
    (tmp_path / "leak.ipynb").write_text(notebook([SETUP, LOOP]), encoding="utf-8")
    run = graphfix(".", cwd=tmp_path)
    assert run.returncode == 123
    assert f"bad.ipynb: error: {message}" in run.stderr.decode()
    assert "leak.ipynb:cell 3:4:5: GF301" in run.stdout.decode()


def test_a_cell_that_does_not_parse_is_skipped_with_a_warning_and_other_kernels_are_not_read(tmp_path):
    broken = process_source("nb.ipynb", notebook(["x = 1", "def f(:\n    loss.backward()"]).encode(), ALL)
    assert broken.errors == []
    assert broken.warnings == [(0, 0, "cell 3 was not checked: cannot parse: invalid syntax (line 1)")]
    julia = json.loads(notebook(["using Flux; x = [1 2 3]'"]))
    julia["metadata"] = {"kernelspec": {"language": "julia", "name": "julia-1.9"}}
    result = process_source("nb.ipynb", json.dumps(julia).encode(), ALL)
    assert (result.errors, result.parsed) == ([], False)


def test_folder_walks_take_notebooks_as_include_and_extend_include_say(tmp_path):
    (tmp_path / "leak.ipynb").write_text(notebook([SETUP, LOOP]), encoding="utf-8")
    assert "leak.ipynb:cell 3" in graphfix(".", cwd=tmp_path).stdout.decode()
    (tmp_path / "pyproject.toml").write_text('[tool.graphfix]\ninclude = ["*.py"]\n')
    assert graphfix(".", cwd=tmp_path).returncode == 0
    assert graphfix("leak.ipynb", cwd=tmp_path).returncode == 1  # named explicitly: checked
    (tmp_path / "pyproject.toml").write_text('[tool.graphfix]\ninclude = ["*.py"]\nextend-include = ["*.ipynb"]\n')
    assert graphfix(".", cwd=tmp_path).returncode == 1


COLAB_CELLS = [
    "from google.colab import drive\ndrive.mount('/content/drive')",
    "cd drive/My\\ Drive\nls\ncd 'Colab Notebooks'",
    "pip install -q torchvision\nenv\n!nvidia-smi",
    SETUP,
    LOOP,
    "def broken(:\n    pass",
    "ls = ['a']\nenv = {}\nenv['X'] = ls\npwd\n",
]


def test_colab_automagics_are_magics_and_an_unparsable_cell_is_skipped_with_a_warning(tmp_path):
    """`cd drive/My\\ Drive`, `ls`, `pip install`, `env` at a line start are IPython automagics (no
    `%`): neutralised as magics. A cell still not Python is left out, named in a warning, and
    every other cell is checked and fixed; the skipped and magic cells stay byte-identical."""
    path = tmp_path / "colab.ipynb"
    text = notebook(COLAB_CELLS)
    path.write_text(text, encoding="utf-8")
    # cells: 1 markdown, 2 and 3 code, 4 markdown, 5 and 6 code, 7 markdown, 8 and 9 code, 10 markdown, 11 code
    run = graphfix("colab.ipynb", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert run.stdout.decode().startswith("colab.ipynb:cell 8:4:5: GF301 [*] ")
    assert "colab.ipynb: warning: cell 9 was not checked: cannot parse: invalid syntax (line 1)\n" in run.stderr.decode()
    assert b"error" not in run.stderr
    fixed = graphfix("--fix", "colab.ipynb", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    after = code_cells(path.read_text(encoding="utf-8"))
    assert after[4] == LOOP.replace("+= loss", "+= loss.item()")
    assert after[:4] + after[5:] == COLAB_CELLS[:4] + COLAB_CELLS[5:]


@pytest.mark.parametrize("line, magic", [
    ("cd drive/My\\ Drive", True), ("ls", True), ("ls -la", True), ("cd ..", True), ("pip install -q x", True),
    ("env", True), ("    ls  # inside a block", True), ("cd 'Colab Notebooks'", True),
    ("ls = []", False), ("env['X'] = '1'", False), ("pip.main(['install', 'x'])", False), ("time in t", False),
    ("run(3)", False), ("history -= 1", False), ("cat: int = 3", False), ("lsx y", False),
])
def test_automagic_lines(line, magic):
    text, replaced = neutralise(line + "\n", lambda: "_p_")
    assert (replaced == [("_p_", line.strip())]) is magic, (text, replaced)
