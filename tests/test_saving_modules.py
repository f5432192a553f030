"""Unit tests of fixer/analysis/saving_modules.py: which module calls save their own weights on
any input (a parametrized layer feeding a weight-saving one), read from the constructions."""

from __future__ import annotations

import ast
import textwrap

from fixer.analysis.saving_modules import saves_own_weights
from fixer.analysis.scopes import scopes
from fixer.context import FileContext


def _saves(source: str) -> bool:
    """Whether the last line's call ``net(x)`` saves the weights of ``net``."""
    ctx = FileContext("t.py", "import torch\nfrom torch import nn\n" + textwrap.dedent(source))
    call = ctx.tree.body[-1].value
    assert isinstance(call, ast.Call)
    return saves_own_weights(ctx, scopes(ctx)[0], call.func)


def test_sequential_chains():
    assert _saves("net = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))\nnet(x)")
    assert _saves("net = nn.Sequential(nn.Embedding(9, 4), nn.Sequential(nn.Tanh(), nn.Linear(4, 1))).to('cpu')\nnet(x)")
    assert not _saves("net = nn.Sequential(nn.Linear(2, 4), nn.ReLU())\nnet(x)")
    assert not _saves("net = nn.Sequential(nn.ReLU(), nn.Linear(2, 4))\nnet(x)")
    assert not _saves("net = nn.Sequential(*layers)\nnet(x)")  # unknown layers


def test_a_class_whose_forward_chains_its_layers():
    cls = """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = nn.Linear(2, 4), nn.Linear(4, 1)

            def forward(self, x):
                {body}

        net = Net()
        net(x)
    """
    assert _saves(cls.format(body="h = torch.relu(self.a(x))\n                return self.b(h)"))
    assert not _saves(cls.format(body="return self.b(x) + self.a(x)"))  # parallel: both on data
    assert not _saves(cls.format(body="return self.b(self.a(x).detach())"))  # a cut: not read


def test_a_name_bound_twice_or_by_a_factory_is_unknown():
    assert not _saves("net = nn.Sequential(nn.Linear(2, 4), nn.Linear(4, 1))\nnet = make()\nnet(x)")
    assert not _saves("net = build_model()\nnet(x)")
    assert _saves("net, other = nn.Sequential(nn.Linear(2, 4), nn.Linear(4, 1)), nn.ReLU()\nnet(x)")
