"""The pre-filter's second look (fixer/literals.py): a rule that a file passed only through a
backward call written inside a string literal runs no analysis of it; one in code, an f-string's
``{...}`` included, still does."""

from __future__ import annotations

import ast

import pytest

from fixer import engine
from fixer.engine import Options, process_source
from fixer.literals import blanked_literals
from fixer.registry import all_rules

DOCSTRING_ONLY = '''def train(model, data):
    """Call ``loss.backward()`` yourself, or torch.autograd.grad(...)."""
    for x in data:
        model(x)
'''
IN_CODE = DOCSTRING_ONLY + "\ndef step(loss):\n    loss.backward()\n"
IN_FSTRING = DOCSTRING_ONLY + '\ndef step(loss):\n    print(f"{loss.backward()}")\n'
NAMES_ONLY = 'HANDLED = ["torch.autograd.grad", b"x.backward()"]\nfor x in []:\n    pass\n'


def _rules_run(text: str, monkeypatch) -> int:
    checked = []
    real = engine._check
    monkeypatch.setattr(engine, "_check", lambda rule, ctx: checked.append(rule) or real(rule, ctx))
    process_source("train.py", text.encode(), Options(rules=tuple(all_rules())))
    return len(checked)


@pytest.mark.parametrize("text", [DOCSTRING_ONLY, NAMES_ONLY])
def test_a_backward_call_only_in_string_literals_runs_no_rule(text, monkeypatch):
    assert engine.active_rules(text.encode(), all_rules())  # the byte pre-filter lets it in
    assert _rules_run(text, monkeypatch) == 0


@pytest.mark.parametrize("text", [IN_CODE, IN_FSTRING])
def test_a_backward_call_in_code_still_runs_the_rules(text, monkeypatch):
    assert _rules_run(text, monkeypatch) == len(engine.active_rules(text.encode(), all_rules()))


def test_blanking_keeps_offsets_and_line_breaks_and_touches_only_those_literals():
    blanked = blanked_literals(IN_CODE, ast.parse(IN_CODE))
    assert blanked is not None and len(blanked) == len(IN_CODE.encode())
    assert blanked.count(b"\n") == IN_CODE.count("\n")
    assert b"loss.backward()\n" in blanked and b"yourself" not in blanked
    fstring_only = 'def step(loss):\n    print(f"{loss.backward()}")\n'
    assert blanked_literals(fstring_only, ast.parse(fstring_only)) is None
