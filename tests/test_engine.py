"""The engine's self-checks: a fix that breaks syntax or never converges leaves the file alone,
a crashing rule is reported without stopping the run, overlapping fixes wait for the next pass."""

from __future__ import annotations

import ast
import re

import pytest

from fixer.apply import apply_edits, select_fixes
from fixer.context import FileContext
from fixer.engine import Options, active_rules, process_source
from fixer.registry import by_code
from fixer.rule import Applicability, Edit, Rule

SOURCE = "loss = model(x)\nloss.backward()\n"


class Broken(Rule):
    code, name, summary = "GF901", "test-broken-fix", "makes invalid code"

    def check(self, ctx):
        if "backward" in ctx.source:
            yield self.diagnostic(ctx, ctx.tree.body[1], "m", [Edit(0, 0, "def (")])


class Forever(Rule):
    code, name, summary = "GF902", "test-never-converges", "appends forever"

    def check(self, ctx):
        # the finding stays where it was (the first statement): a finding that moves is not a new one
        yield self.diagnostic(ctx, ctx.tree.body[0], "m", [Edit(len(ctx.source), len(ctx.source), "x = 1\n")])


class Crashes(Rule):
    code, name, summary = "GF903", "test-crashes", "raises"

    def check(self, ctx):
        raise KeyError("boom")


class Unsafe(Rule):
    code, name, summary = "GF904", "test-unsafe-fix", "unsafe rename"

    def check(self, ctx):
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Name) and node.id == "loss":
                start, end = ctx.span(node)
                yield self.diagnostic(ctx, node, "m", [Edit(start, end, "total")], Applicability.UNSAFE)


def run(rule, **options):
    return process_source("t.py", SOURCE.encode(), Options(rules=(rule,), fix=True, **options))


def test_fix_producing_invalid_code_is_refused():
    result = run(Broken)
    assert not result.changed and "produced invalid code" in result.errors[0]


def test_fix_that_never_converges_is_refused():
    result = run(Forever)
    assert not result.changed and "did not converge" in result.errors[0]


def test_rule_crash_is_reported_not_raised():
    result = run(Crashes)
    assert result.errors == ["rule GF903 (test-crashes) crashed: KeyError: 'boom'"]


def test_unsafe_fixes_need_opt_in():
    assert not run(Unsafe).changed
    assert run(Unsafe, unsafe=True).fixed == "total = model(x)\ntotal.backward()\n"


def test_prefilter_skips_files_without_the_needle():
    class Needle(Crashes):
        prefilter = re.compile(rb"never-present")

    result = process_source("t.py", SOURCE.encode(), Options(rules=(Needle,)))
    assert not result.parsed and not result.errors


@pytest.mark.parametrize("code", ["GF109", "GF110", "GF111", "GF112"])
def test_rules_of_a_class_beside_the_loop_need_its_backward_too(code):
    """A class's setup graph, cache or memo is a bug only where a loop of the file backpropagates
    through it: a library module that merely defines classes (most of torch's tree) is not parsed for
    them, a file with both is. (Their needle alone let 1,021 of torch's 2,285 files in, 95 now.)"""
    rule = by_code(code)
    library = b"import torch\nclass Scale(torch.nn.Module):\n    def __init__(self):\n        self.w = torch.nn.Parameter(torch.ones(1))\n"
    library += b"    def cached(self):\n        return self.w\n"
    assert active_rules(library, [rule]) == []
    assert active_rules(library + b"for x in data:\n    Scale().cached().sum().backward()\n", [rule]) == [rule]


def test_overlapping_fixes_wait_for_the_next_pass():
    class Both(Rule):
        code, name, summary = "GF905", "test-overlap", "two edits on one span"

        def check(self, ctx):
            if "x" in ctx.source:
                yield self.diagnostic(ctx, ctx.tree.body[0], "a", [Edit(0, 1, "y")])
                yield self.diagnostic(ctx, ctx.tree.body[0], "b", [Edit(0, 4, "z")])

    diagnostics = list(Both().check(FileContext("t.py", "x = 1")))
    chosen = select_fixes(diagnostics, unsafe=False)
    assert len(chosen) == 1
    assert apply_edits("x = 1", chosen[0].fix.edits) in ("y = 1", "z1")


def test_non_ascii_columns_are_characters():
    source = "é = 1; loss = model(x)\nloss.backward()\n"
    result = process_source("t.py", source.encode(), Options(rules=(Unsafe,), fix=True, unsafe=True))
    assert result.fixed == "é = 1; total = model(x)\ntotal.backward()\n"
    assert result.diagnostics[0].col == 7
