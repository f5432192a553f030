"""What the statements between two backward calls may do to gradients and parameters
(fixer/analysis/gradient_effects.py): functions of other project files are looked into, a method
rebinding its own fields changes no parameter."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from fixer.analysis.gradient_effects import Effect, gradient_effect
from fixer.analysis.scopes import scopes
from fixer.context import FileContext


def effect_of_marked(path: Path, source: str) -> Effect:
    """The effect of the statements marked ``# here`` in ``source``, written to ``path``."""
    text = textwrap.dedent(source)
    path.write_text(text)
    ctx = FileContext(str(path), text, ast.parse(text))
    marked = {number for number, line in enumerate(text.splitlines(), 1) if line.endswith("# here")}
    for scope in reversed(scopes(ctx)):  # the innermost scope holding them
        stmts = [s for s in ast.walk(scope.node) if isinstance(s, ast.stmt) and s.lineno in marked and s is not scope.node]
        if stmts:
            return gradient_effect(ctx, scope, stmts)
    raise AssertionError("no statement marked")


HELPERS = """
import torch

def sparsity(code):
    return code.abs().mean() * 0.1

def update(opt, loss):
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(
    "statement, expected",
    [("sparse = sparsity(code)", Effect.NONE), ("sparse = helpers.sparsity(code)", Effect.NONE), ("update(opt, loss)", Effect.CHANGES)],
)
def test_a_function_of_another_project_file_is_looked_into(tmp_path: Path, statement: str, expected: Effect) -> None:
    (tmp_path / "helpers.py").write_text(HELPERS)
    source = f"""
    import helpers
    from helpers import sparsity, update
    for batch in data:
        code = encoder(batch)
        {statement}  # here
    """
    assert effect_of_marked(tmp_path / "train.py", source) == expected


def test_an_unknown_function_may_change_parameters(tmp_path: Path) -> None:
    source = """
    from elsewhere import sparsity
    for batch in data:
        sparse = sparsity(code)  # here
    """
    assert effect_of_marked(tmp_path / "train.py", source) == Effect.CHANGES


@pytest.mark.parametrize(
    "statement, expected",
    [("self.sparse = self.code.abs().mean()", Effect.NONE), ("self.weight.data = self.code", Effect.CHANGES),
     ("self.data = self.code", Effect.CHANGES), ("model.weight = self.code", Effect.CHANGES)],
)
def test_a_method_rebinding_its_own_field_changes_no_parameter(tmp_path: Path, statement: str, expected: Effect) -> None:
    source = f"""
    class Trainer:
        def step(self, batch):
            self.code = self.encoder(batch)
            {statement}  # here
    """
    assert effect_of_marked(tmp_path / "train.py", source) == expected
