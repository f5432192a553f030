"""fixer.analysis.recurring: whether a guarded statement may run on several iterations of its loop."""

from __future__ import annotations

import ast

import pytest

from fixer.analysis.recurring import runs_on_many_iterations
from fixer.context import FileContext

LOOP = """
import torch
for i, batch in enumerate(loader):
    loss.backward()
    {guard}
        opt.step(){after}
"""


@pytest.mark.parametrize("guard, after, many", [
    ("if torch.isfinite(norm):", "", True),
    ("if torch.isfinite(norm).all():", "", True),
    ("if loss.item() < best:", "", True),
    ("if step > warmup and loss.item() < 5:", "", True),
    ("if i == len(loader) - 1:", "", False),
    ("if done:", "", False),  # a flag says nothing
    ("if ready(i):", "", False),  # neither does a call of the project
    ("if torch.isfinite(norm):", "\n        break", False),  # the branch leaves the loop
    ("if not torch.isfinite(norm):", "", True),
    ("if not i == 0:", "", False),
    ("if torch.isfinite(norm) or i == 0:", "", False),
])
def test_guards_that_hold_on_many_iterations(guard, after, many):
    ctx = FileContext("t.py", LOOP.format(guard=guard, after=after))
    loop = next(n for n in ast.walk(ctx.tree) if isinstance(n, ast.For))
    step = next(n for n in ast.walk(ctx.tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "step")
    assert runs_on_many_iterations(ctx, step, loop) is many
