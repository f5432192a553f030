"""A fix is checked, not only the finding: a fix that would bring in a finding the text before its
pass did not have (of any rule) is not applied; its finding remains and the refusal is reported.
Test-only rules with deliberately wrong fixes show the engine refusing them."""

from __future__ import annotations

import ast
import io
import json
import re
from types import SimpleNamespace

import pytest

from fixer import cli, hierarchy
from fixer.engine import Options, process_source
from fixer.fixcheck import EditMap
from fixer.registry import all_rules, by_code
from fixer.rule import Edit, Rule
from fixer.source import split_lines
from tests.fixture_cases import discover
from tests.fuzzcheck import more_findings
from tests.test_text_variants import VARIANTS

GF301, GF302 = by_code("GF301"), by_code("GF302")
PROGRAM = """\
import torch
from torch import nn

model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
running_loss = 0.0
for step in range(3):
    opt.zero_grad()
    loss = model(torch.randn(4, 3)).pow(2).mean()
    loss.backward()
    opt.step()
    running_loss += loss
"""
PARTLY_FIXED = PROGRAM.replace("running_loss += loss", "running_loss += loss.item()")
REFUSAL = "GF906's fix (line 10) would introduce GF302 (needless-retain-graph) at line 10; not applied"


class AddsRetain(Rule):
    """A wrong fix: ``x.backward()`` -> ``x.backward(retain_graph=True)``, which GF302 reports."""

    code, name, summary = "GF906", "test-adds-retain-graph", "keeps every graph"

    def check(self, ctx):
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "backward" and not node.args and not node.keywords:
                end = ctx.span(node)[1] - 1  # before ")"
                yield self.diagnostic(ctx, node, "m", [Edit(end, end, "retain_graph=True")])


class ReportsRetain(Rule):
    """Runs only on files that mention retain_graph: a fix can make it run."""

    code, name, summary = "GF907", "test-reports-retain-graph", "any retain_graph"
    prefilter = re.compile(rb"retain_graph")

    def check(self, ctx):
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.keyword) and node.arg == "retain_graph":
                yield self.diagnostic(ctx, node, "m")


class Chain(Rule):
    """Reports only the first ``# todo`` line; fixing it reveals the next: fixed over several passes."""

    code, name, summary = "GF908", "test-chain", "one link per pass"

    def check(self, ctx):
        for node in ctx.tree.body:
            start, end = ctx.span(node)
            line_end = ctx.line_end(node.end_lineno) - 1
            if ctx.source[end:line_end].strip() == "# todo":
                at = ctx.source.index("todo", end)
                yield self.diagnostic(ctx, node, "m", [Edit(at, at + 4, "done, checked")])
                return


def fix(text: str, *rules: type[Rule]):
    return process_source("t.py", text.encode(), Options(rules=rules, fix=True, unsafe=True))


def test_a_fix_bringing_in_another_rules_finding_is_refused_and_reported():
    result = fix(PROGRAM, AddsRetain, GF302)
    assert not result.changed and result.errors == []
    assert result.refused == [REFUSAL]
    [kept] = result.remaining
    assert (kept.code, kept.line, kept.fix, kept.fix_refused) == ("GF906", 10, None, REFUSAL)


def test_only_the_fix_that_brings_it_in_is_dropped_from_its_pass():
    result = fix(PROGRAM, AddsRetain, GF301, GF302)
    assert result.fixed == PARTLY_FIXED  # GF301's fix, applied in the same pass, is kept
    assert result.refused == [REFUSAL]  # once, although the file took a second pass
    assert [d.code for d in result.remaining] == ["GF906"]


def test_a_rule_a_fix_makes_pass_its_prefilter_is_run():
    assert not ReportsRetain.applies_to(PROGRAM.encode())
    result = fix(PROGRAM, AddsRetain, ReportsRetain)
    assert not result.changed
    assert result.refused == ["GF906's fix (line 10) would introduce GF907 (test-reports-retain-graph) at line 10; not applied"]


def test_a_rule_fixing_a_chain_in_passes_is_not_refused():
    source = "a = 1  # todo\nb = 2  # todo\nloss.backward()\n"
    result = fix(source, Chain)
    assert result.fixed == source.replace("todo", "done, checked") and result.refused == [] and result.errors == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_findings_that_only_move_are_not_new(variant):
    """The fix of line 1 lengthens it; GF907's finding below moves and is still the same finding,
    however the text writes its lines down."""
    transform = VARIANTS[variant]
    source = transform("a = 1  # todo\nloss.backward(retain_graph=True)\n")
    result = fix(source, Chain, ReportsRetain)
    assert result.fixed == source.replace("todo", "done, checked") and result.refused == []
    assert [d.code for d in result.remaining] == ["GF907"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_refusal_is_the_same_under_every_text_variant(variant):
    transform = VARIANTS[variant]
    source = transform(PROGRAM)
    result = fix(source, AddsRetain, GF301, GF302)
    assert result.fixed == transform(PARTLY_FIXED)
    line = next(n for n, text in enumerate(split_lines(source), 1) if "loss.backward()" in text)
    assert result.refused == [REFUSAL.replace("line 10", f"line {line}")]


BEFORE = [c.before for c in discover() if c.before]


def test_over_every_fixture_a_wrong_fix_is_refused_wherever_it_brings_in_a_finding():
    """All rules plus the wrong fix over every before fixture: no rule finds more in the fixed
    text than in the original (an independent count, not the engine's matching)."""
    rules = (*all_rules(), AddsRetain)
    refused = 0
    for path in BEFORE:
        result = process_source(str(path), path.read_bytes(), Options(rules=rules, fix=True, unsafe=True))
        assert result.errors == [], (path, result.errors)
        refused += len(result.refused)
        fixed = result.fixed if result.changed else path.read_text(encoding="utf-8")
        again = process_source(str(path), fixed.encode(), Options(rules=rules))
        assert more_findings(result.diagnostics, again.diagnostics) == [], path
        assert all(d.fix_refused and d.fix is None for d in result.remaining if d.code == "GF906"), path
    assert refused > len(BEFORE) // 2


def test_edit_map_maps_offsets_back_through_insertions_deletions_and_replacements():
    # "abcdef": insert "XY" at 2, delete "d", replace "f" with "Z" -> "abXYceZ"
    edits = [Edit(2, 2, "XY"), Edit(3, 4, ""), Edit(5, 6, "Z")]
    mapping = EditMap(edits)
    assert [mapping.back(q) for q in range(8)] == [(0, 0), (1, 1), (2, 2), (2, 2), (2, 2), (3, 4), (5, 6), (5, 6)]
    assert EditMap([Edit(1, 2, "X"), Edit(2, 3, "Y")]).back(2) == (1, 3)  # "abc" -> "aXY": both edits'
    assert EditMap([]).back(5) == (5, 5)


@pytest.fixture
def wrong_fix_cli(tmp_path, monkeypatch, capsys):
    """Run the CLI in-process with the wrong fix among the rules; returns (exit code, stdout, stderr)."""
    monkeypatch.setattr(hierarchy, "select_rules", lambda *args: [AddsRetain, GF301, GF302])
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.py").write_text(PROGRAM)

    def run(*args: str):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(list(args))
        out = capsys.readouterr()
        return exit_info.value.code, out.out, out.err

    return run


def test_cli_fix_reports_the_refusal_on_stderr_and_exits_1(wrong_fix_cli, tmp_path):
    code, out, err = wrong_fix_cli("--fix", "t.py")
    assert code == 1  # the finding remains: not an error (123)
    assert (tmp_path / "t.py").read_text() == PARTLY_FIXED
    assert out == "t.py:10:5: GF906 m\n"  # no fix marker: its fix is not applicable
    assert err.startswith(f"t.py: warning: {REFUSAL}\n")
    assert "1 finding(s) remaining (1 fix(es) refused)" in err


def test_cli_json_carries_the_refusal(wrong_fix_cli):
    code, out, _ = wrong_fix_cli("--fix", "--output-format", "json", "t.py")
    [record] = json.loads(out)
    assert (code, record["code"], record["fix"], record["fix_refused"]) == (1, "GF906", None, REFUSAL)


def test_cli_diff_and_stdin_report_the_refusal(wrong_fix_cli, tmp_path, monkeypatch):
    code, out, err = wrong_fix_cli("--diff", "t.py")
    assert code == 1 and "+    running_loss += loss.item()\n" in out and "retain_graph" not in out
    assert f"t.py: warning: {REFUSAL}\n" in err
    monkeypatch.setattr(cli.sys, "stdin", SimpleNamespace(buffer=io.BytesIO(PROGRAM.encode())))
    code, out, err = wrong_fix_cli("--fix", "--stdin-filename", "t.py", "--silent")
    assert (code, out, err) == (1, PARTLY_FIXED, "")
