"""Fixing costs a number of analyses of the file that does not grow with its findings (issue 26):
a pass whose fixes bring in findings (a band-aid left needless, a refused fix) checks the fixes of
all scopes in turns together, not one fix per analysis. Counted, not timed: a rule that records
each analysis of the file runs among the real ones. The turns must give what adding the fixes one
by one gives, refusals included."""

from __future__ import annotations

import ast
import json

import pytest

from benchmarks.scaling import generated_notebook, generated_source
from fixer import fixpass, nodes
from fixer.context import FileContext
from fixer.engine import Options, process_source
from fixer.registry import all_rules, by_code
from fixer.rule import Rule
from tests.fixture_cases import discover
from tests.test_fix_check import AddsRetain

GF301, GF302 = by_code("GF301"), by_code("GF302")


class CountsAnalyses(Rule):
    """Reports nothing; counts the analyses of a file (every rule runs once in each)."""

    code, name, summary = "GF909", "test-counts-analyses", "counts"
    runs = 0

    def check(self, ctx):
        CountsAnalyses.runs += 1
        return iter(())


def analyses(name: str, text: str, *rules: type[Rule]):
    CountsAnalyses.runs = 0
    result = process_source(name, text.encode(), Options(rules=(*rules, CountsAnalyses), fix=True, unsafe=True))
    return result, CountsAnalyses.runs


@pytest.mark.parametrize("size", [4, 40])
def test_issue_file_is_fixed_in_a_few_analyses_whatever_its_findings(size):
    """N copies of issue 26's function, each called with data: GF301 and GF302 in every function,
    fixed together. The one-by-one check took one analysis per function (42 for 40 functions)."""
    result, runs = analyses("t.py", generated_source(size, "issue"), *all_rules())
    assert result.errors == [] and result.refused == [] and result.remaining == []
    assert result.fixed.count("running_loss += loss.item()") == size and "retain_graph" not in result.fixed
    assert runs <= 4  # the check, one analysis a pass (2 passes), one spare


def test_many_scopes_with_several_rules_each_take_a_few_analyses():
    text = generated_source(60)  # functions, functions without zero_grad, classes: GF203, GF301, GF302
    result, runs = analyses("t.py", text, *all_rules())
    assert result.errors == [] and result.remaining == []
    assert result.fixed.count("optimizer.zero_grad()") == 60 and result.fixed.count(".item()") == 60
    # the check and the pass fixing GF203, GF301 and GF302 together (the scopes are called with
    # data, so the needless retain_graph=True is a finding from the start)
    assert runs == 2


def test_a_notebook_of_many_training_cells_takes_a_few_analyses():
    result, runs = analyses("t.ipynb", generated_notebook(40), *all_rules())
    assert result.errors == [] and result.remaining == []
    assert len(result.cells) == 40 and "retain_graph" not in result.fixed
    json.loads(result.fixed)
    assert runs == 2


@pytest.mark.parametrize("fix", [False, True])
def test_the_work_on_a_notebook_grows_with_its_cells(monkeypatch, fix):
    """A notebook's top-level loops are all one scope, the module's: analyses that asked each
    backward call about every other one of the scope, or scanned every definition of a name at
    each use of it, did work quadratic in the cells (4 times the cells, 10 times the work: a
    1,000-cell --diff took 31 s). Counted in steps up the tree (every analysis climbs it), 4 times
    the cells cost about 4 times the work, checking and fixing."""
    steps, climb = [0], FileContext.parent

    def counted(self, node):
        steps[0] += 1
        return climb(self, node)

    monkeypatch.setattr(FileContext, "parent", counted)

    def work(cells: int) -> int:
        steps[0] = 0
        result = process_source("t.ipynb", generated_notebook(cells).encode(), Options(rules=all_rules(), fix=fix, unsafe=True))
        assert len(result.diagnostics) == 2 * cells and (not fix or result.remaining == [])
        return steps[0]

    assert work(160) < 5 * work(40)


def test_the_work_on_a_file_of_many_scopes_grows_with_them(monkeypatch):
    """Functions, functions without zero_grad and classes keeping losses, one after another: a
    question asked of every class that walked the whole file (is it subclassed anywhere?) made
    checking quadratic in the classes (a 1,000-scope file took 18 s to check, 2.6 s without it).
    Counted in nodes whose children a walk lists (stdlib ``ast.walk`` and ``fixer.nodes.walk``),
    4 times the scopes cost about 4 times the work."""
    listed, stdlib, ours = [0], ast.iter_child_nodes, nodes.child_nodes

    def counted(original):
        def listing(node):
            listed[0] += 1
            return original(node)
        return listing

    monkeypatch.setattr(ast, "iter_child_nodes", counted(stdlib))
    monkeypatch.setattr(nodes, "child_nodes", counted(ours))

    def work(size: int) -> int:
        listed[0] = 0
        result = process_source("t.py", generated_source(size).encode(), Options(rules=all_rules()))
        assert len(result.diagnostics) == 2 * size
        return listed[0]

    assert work(120) < 5 * work(30)


def test_a_refused_fix_in_every_scope_takes_a_few_analyses_and_is_refused_everywhere(monkeypatch):
    """30 functions that never zero their gradients (GF203) and where the wrong fix writes
    retain_graph=True (GF302 reports it): in every function GF203's fix is kept and the wrong fix
    refused, as one by one (62 analyses), in a bounded number of analyses."""
    text = (
        generated_source(30, "issue").replace("        optimizer.zero_grad()\n", "")
        .replace("loss.backward(retain_graph=True)", "loss.backward()").replace("running_loss += loss", "running_loss += loss.item()")
    )
    result, runs = analyses("t.py", text, AddsRetain, *all_rules())
    assert result.errors == [] and result.fixed.count("optimizer.zero_grad()") == 30 and "retain_graph" not in result.fixed
    assert len(result.refused) == 30 and all("would introduce GF302" in why for why in result.refused)
    assert runs <= 8
    monkeypatch.setattr(fixpass._Pass, "by_regions", lambda self: None)
    one_by_one, runs = analyses("t.py", text, AddsRetain, *all_rules())
    assert (one_by_one.fixed, one_by_one.remaining) == (result.fixed, result.remaining) and runs > 60


BEFORE = [c.before for c in discover() if c.before]


def test_the_turns_give_the_one_by_one_outcome_on_every_fixture(monkeypatch):
    """Every before fixture with every rule and the wrong fix (refusals in most files): the same
    text, findings and refusals as adding the fixes one by one (the turns switched off)."""
    options = Options(rules=(*all_rules(), AddsRetain), fix=True, unsafe=True)

    def outcome(path):
        result = process_source(str(path), path.read_bytes(), options)
        return result.fixed, result.errors, [(d.code, d.line, d.col, d.fix_refused) for d in result.remaining]

    turns = [outcome(path) for path in BEFORE]
    monkeypatch.setattr(fixpass._Pass, "by_regions", lambda self: None)
    assert [outcome(path) for path in BEFORE] == turns


def test_regions_that_depend_on_each_other_are_checked_one_by_one():
    """The wrong fix in the step function (line 16) and GF106's fix in the loop (line 24: the second
    backward deleted) lie in two regions, but the retain_graph=True the wrong fix writes is needless
    (GF302) only once the loop's backward is gone. Tried in one turn, GF302 is charged to the step
    function's fix; that fix alone does not bring it in, so the pass adds the fixes one by one: the
    wrong fix is kept (alone it brings in nothing) and GF106's refused; in the next pass the wrong
    fix at line 24 silences GF106 (retain_graph=True allows the second backward)."""
    path = next(p for p in BEFORE if p.name == "loss_returned_by_step_function.before.py")
    result = process_source(str(path), path.read_bytes(), Options(rules=(*all_rules(), AddsRetain), fix=True, unsafe=True))
    assert [(d.code, d.line) for d in result.diagnostics] == [("GF906", 16), ("GF106", 24), ("GF906", 24)]
    assert result.errors == [] and result.remaining == []
    assert result.fixed.count("loss.backward(retain_graph=True)") == 2
