"""Two model facts of the setup analysis: which functions run once (fixer.analysis.run_once), and
what a ``for`` loop over a collection of parameters binds (fixer.analysis.parameter_collections)."""

from __future__ import annotations

import ast

import pytest

from fixer.analysis.parameter_collections import PARAMETER, Items, loop_element
from fixer.analysis.run_once import runs_once
from fixer.analysis.scopes import scopes
from fixer.context import FileContext

CALLS = """
class Model:
    def __init__(self):
        self.build()

    def build(self):
        pass

    def prepare(self):
        pass

    def refresh(self):
        pass

    def fit(self, batches):
        for batch in batches:
            self.refresh()


def main(model):
    model.prepare()
    model.fit([1, 2])


model = Model()
main(model)
{extra}
"""


def _scope(ctx: FileContext, name: str):
    return next(s for s in scopes(ctx) if getattr(s.node, "name", None) == name)


@pytest.mark.parametrize("extra, once", [
    ("", {"__init__", "build", "prepare", "fit", "main"}),
    ("for _ in range(2):\n    main(model)", {"__init__", "build"}),  # main (and all it calls) runs twice
    ("hooks = [model.prepare]", {"__init__", "build", "fit", "main"}),  # passed as a value: called who knows when
    ("results = [main(model) for _ in range(2)]", {"__init__", "build"}),
])
def test_functions_that_run_once(extra, once):
    ctx = FileContext("t.py", CALLS.format(extra=extra))
    names = ("__init__", "build", "prepare", "refresh", "fit", "main")
    assert {n for n in names if runs_once(ctx, _scope(ctx, n))} == once


GROUPS = """
class Net:
    def __init__(self, body, head):
        self.groups = []
        self.add(body.parameters(), 0.1)
        self.add([p for n, p in head.named_parameters() if n == "weight"], 0.2)
        self.stats = [torch.zeros(3)]

    def add(self, params, coef):
        self.groups.append((list(params), coef))

    def penalty(self):
        for params, coef in self.groups:
            for p in params:
                pass
        for name, q in self.body.named_parameters():
            pass
        for s in self.stats:
            pass
{extra}
"""


def _elements(source: str) -> dict[str, object]:
    ctx = FileContext("t.py", source)
    scope = _scope(ctx, "penalty")
    found = {}
    for loop in (n for n in ast.walk(scope.node) if isinstance(n, ast.For)):
        for target in (t for t in ast.walk(loop.target) if isinstance(t, ast.Name)):
            found[target.id] = loop_element(ctx, scope, loop, target.id)
    return found


def test_loop_targets_over_parameter_collections():
    found = _elements(GROUPS.format(extra=""))
    assert found["params"] == Items(PARAMETER) and found["p"] == PARAMETER and found["q"] == PARAMETER
    assert found["coef"] is None and found["name"] is None and found["s"] is None  # numbers, names, data: not known


@pytest.mark.parametrize("extra", [
    "net = Net(a, b)\nnet.groups.append(([torch.ones(2)], 0.5))",  # filled from outside the class too
    "net = Net(a, b)\nnet.groups = []",
    "    def swap(self, params):\n        self.groups[0] = (params, 1.0)",  # an element replaced
])
def test_a_field_written_elsewhere_is_not_known(extra):
    assert _elements(GROUPS.format(extra=extra))["p"] is None
