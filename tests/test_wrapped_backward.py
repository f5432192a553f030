"""Unit tests of fixer/analysis/wrapped_backward.py and instance_methods.py: a call of a project
method named ``backward`` is that method, and two calls of a function that only backpropagates a
linear image of its argument merge into one call on the sum; anything more keeps them apart."""

from __future__ import annotations

import textwrap

from codemods.separate_backward_through_shared_graph import SeparateBackwardThroughSharedGraph
from fixer.analysis.calls import backward_calls
from fixer.analysis.scopes import scopes
from fixer.context import FileContext

PROGRAM = """
import torch
from torch import nn

class Wrapper:
    def __init__(self, scale):
        self.scale = scale

    def backward(self, loss, flag=False):
{body}

trunk, head_a, head_b = nn.Linear(2, 4), nn.Linear(4, 1), nn.Linear(4, 1)
helper = Wrapper(8.0)
for _ in range(2):
    h = torch.tanh(trunk(torch.randn(3, 2)))
    a, b = head_a(h).mean(), head_b(h).mean()
    helper.backward(a{first})
    helper.backward(b{second})
"""


def _findings(body: str, first: str = "", second: str = "") -> list[tuple[str, bool]]:
    source = PROGRAM.format(body=textwrap.indent(textwrap.dedent(body).strip(), " " * 8), first=first, second=second)
    ctx = FileContext("t.py", source)
    return [(d.code, bool(d.fix)) for d in SeparateBackwardThroughSharedGraph().check(ctx)]


def test_a_method_named_backward_of_a_project_class_is_not_a_tensor_backward():
    ctx = FileContext("t.py", PROGRAM.format(body="        (loss * self.scale).backward()", first="", second=""))
    assert backward_calls(ctx, scopes(ctx)[0]) == []  # `helper.backward(a)` runs Wrapper.backward
    method = next(s for s in scopes(ctx) if getattr(s.node, "name", "") == "backward")
    assert [c.node.lineno for c in backward_calls(ctx, method)] == [10]


def test_linear_image_then_a_branch_not_taken_merges():
    body = """
        scaled = -loss.double() * self.scale / 2
        scaled.backward()
        if flag:
            print(loss)
    """
    assert _findings(body) == [("GF105", True)]
    assert _findings(body, first=", flag=False", second=", flag=False") == [("GF105", True)]


def test_a_branch_taken_or_undecided_gives_no_fix():
    body = """
        (loss * self.scale).backward()
        if flag:
            print(loss)
    """
    assert _findings(body, first=", flag=True", second=", flag=True") == [("GF105", False)]
    assert _findings(body, first=", flag=_", second=", flag=_") == [("GF105", False)]


def test_gradient_work_after_the_backward_gives_no_fix():
    body = """
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trunk.parameters(), 1.0)
    """
    assert _findings(body) == [("GF105", False)]


def test_a_nonlinear_image_gives_no_fix():
    assert _findings("(loss * loss).backward()") == [("GF105", False)]
    assert _findings("(loss + 1.0).backward()") == [("GF105", False)]


def test_calls_differing_in_two_arguments_give_no_fix():
    assert _findings("(loss * self.scale).backward()", first=", flag=True", second="") == [("GF105", False)]


def test_a_wrapper_that_keeps_the_graph_is_not_a_freeing_step():
    assert _findings("(loss * self.scale).backward(retain_graph=flag)", first=", flag=True") == []


def test_the_wrapper_of_another_file_compares_its_defaults_in_its_own_file(tmp_path):
    """The class in helpers.py, the calls in train.py: the default ``flag=False`` both calls take is
    a node of helpers.py (read with train.py's text it was out of range: the rule crashed)."""
    source = PROGRAM.format(body="        (loss * self.scale).backward()", first="", second="")
    cut = source.index("\ntrunk")
    (tmp_path / "helpers.py").write_text("# a long header\n" * 40 + source[:cut])  # the default past train.py's last line
    script = "import torch\nfrom torch import nn\nfrom helpers import Wrapper\n" + source[cut:]
    (tmp_path / "train.py").write_text(script)
    ctx = FileContext(str(tmp_path / "train.py"), script)
    assert [(d.code, bool(d.fix)) for d in SeparateBackwardThroughSharedGraph().check(ctx)] == [("GF105", True)]
