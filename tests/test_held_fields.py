"""A value read back from a dict or tuple kept in a field of the method's own object
(``self.out["real"]`` after ``self.out = {"real": real, ...}`` in the same method) is that value,
unless something that could store into the field runs in between: a method of the object, or a
call the object is handed to (fixer.analysis.held_values)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from fixer.analysis.held_values import held_name
from fixer.analysis.scopes import scope_nodes, scopes
from fixer.context import FileContext
from fixer.engine import Options, process_source
from fixer.registry import all_rules

TEMPLATE = """
class Step{bases}:
    def __init__(self, net):
        self.net = net

    def refresh(self):
        self.out = {{}}

    def run(self, real, noise):
        self.out = {{"real": real, "made": noise}}
        {between}
        return self.out["real"]
"""


def _resolved(bases: str, between: str):
    ctx = FileContext("step.py", textwrap.dedent(TEMPLATE.format(bases=bases, between=between)))
    run = next(s for s in scopes(ctx) if getattr(s.node, "name", "") == "run")
    read = next(n for n in scope_nodes(run) if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute))
    found = held_name(ctx, run, read)
    return found.id if found is not None else None


@pytest.mark.parametrize("between", ["pass", "score = self.net(real)", "self.score = real * 2"])
def test_a_field_read_in_the_method_that_stored_it_is_the_stored_value(between):
    assert _resolved("", between) == "real"


@pytest.mark.parametrize(
    "bases, between",
    [
        ("", "self.refresh()"),  # a method of the class may store into the field
        ("", "log(self)"),  # so may a call the object is handed to
        ("(Base)", "score = self.net(real)"),  # with a base, self.net(...) may be an inherited method
        ("", 'self.out["real"] = noise'),  # stored into
        ("", "keep(self.out)"),  # handed to a call
    ],
)
def test_a_field_that_may_change_in_between_gives_no_fact(bases, between):
    assert _resolved(bases, between) is None


def test_a_plain_holder_still_resolves():
    ctx = FileContext("plain.py", 'def f(real, noise):\n    out = {"real": real, "made": noise}\n    return out["real"]\n')
    scope = next(s for s in scopes(ctx) if getattr(s.node, "name", "") == "f")
    read = next(n for n in scope_nodes(scope) if isinstance(n, ast.Subscript))
    assert held_name(ctx, scope, read).id == "real"


HANDED_ON = '''
import torch
from torch import nn


def judged(step, real_score, made_score):
    return step.criterion(real_score, torch.ones_like(real_score)) + step.criterion(made_score, torch.zeros_like(made_score))


class Step:
    def __init__(self, maker, judge):
        self.maker, self.judge = maker, judge
        self.maker_opt = torch.optim.SGD(maker.parameters(), lr=0.1)
        self.judge_opt = torch.optim.SGD(judge.parameters(), lr=0.1)
        self.criterion = nn.BCEWithLogitsLoss()

    def run(self, images):
        self.batch = {"real": images, "made": self.maker(torch.randn(images.shape[0], 2))}
        self.judge_opt.zero_grad()
        judge_loss = judged(self, self.judge(self.batch["real"]), self.judge(self.batch["made"].detach()))
        judge_loss.backward()
        self.judge_opt.step()
        self.maker_opt.zero_grad()
        fooled = self.judge(self.batch["made"])
        maker_loss = self.criterion(fooled, torch.ones_like(fooled))
        maker_loss.backward()
        self.maker_opt.step()


step = Step(nn.Linear(2, 3), nn.Linear(3, 1))
for _ in range(2):
    step.run(torch.randn(4, 3))
'''


def test_an_element_we_cannot_name_shares_no_graph():
    """The object is handed to a loss helper, so ``self.batch["real"]`` is not proven to be the
    real images: it is unknown, which is no evidence that the critic's loss reaches the fake."""
    result = process_source("step.py", HANDED_ON.encode(), Options(rules=tuple(all_rules()), fix=False, unsafe=True))
    assert [d.code for d in result.diagnostics] == []
