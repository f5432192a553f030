"""A library module (``nn.Linear``, a ``Sequential`` of them) runs unrecorded under the sanitizer
and only its outputs are tagged, with the line that called it; a module of the user's code inside
it is recorded again, line by line. Nothing stays installed after the run."""

from __future__ import annotations

import inspect

import pytest

torch = pytest.importorskip("torch", reason="graphfix run executes programs, which need torch")

from torch import nn  # noqa: E402

from fixer.runtime import graphwalk  # noqa: E402
from fixer.runtime.session import Session  # noqa: E402


class Scale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(4))

    def forward(self, h):
        return h * self.weight  # the user's line


def _line(record) -> int:
    return record.stack[0][1]


def _line_of(function, text: str) -> int:
    lines, start = inspect.getsourcelines(function)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_library_module_outputs_carry_the_calling_line_and_user_modules_their_own():
    torch.manual_seed(0)
    linear, net = nn.Linear(3, 4), nn.Sequential(nn.Linear(3, 4), Scale(), nn.Tanh())
    x = torch.randn(2, 3)
    with Session():
        out = linear(x)  # call: linear
        deep = net(x)  # call: net
        after = out * 2  # after the module calls
    here = test_library_module_outputs_carry_the_calling_line_and_user_modules_their_own
    assert _line(graphwalk.record(out.grad_fn)) == _line_of(here, "# call: linear")
    assert _line(graphwalk.record(deep.grad_fn)) == _line_of(here, "# call: net")  # Tanh's node
    scaled = deep.grad_fn.next_functions[0][0]  # built in Scale.forward: recorded there
    assert _line(graphwalk.record(scaled)) == _line_of(Scale.forward, "# the user's line")
    inner = scaled.next_functions[0][0]  # the first Linear's node: no record of its own
    assert graphwalk.record(inner) is None
    assert _line(graphwalk.inherited_records([deep.grad_fn])[id(inner)]) == _line_of(Scale.forward, "# the user's line")
    assert _line(graphwalk.record(after.grad_fn)) == _line_of(here, "# after the module calls")


def test_nothing_stays_installed():
    import torch.nn.modules.module as module_hooks

    before = (len(module_hooks._global_forward_pre_hooks), len(module_hooks._global_forward_hooks), nn.Module.__call__)
    with Session():
        assert nn.Module.__call__ is not before[2]
        nn.Linear(3, 1)(torch.randn(2, 3)).sum().backward()
    assert (len(module_hooks._global_forward_pre_hooks), len(module_hooks._global_forward_hooks), nn.Module.__call__) == before
    assert torch.overrides._get_current_function_mode() is None
    assert nn.Linear(3, 1)(torch.randn(2, 3)).grad_fn.metadata == {}


def test_a_library_module_that_raises_leaves_recording_as_it_was():
    """A program that catches a module's error and goes on is still recorded afterwards."""
    with Session() as session:
        try:
            nn.Linear(3, 1)(torch.randn(2, 4))  # wrong width: the library's forward raises
        except RuntimeError:
            pass
        after = torch.randn(2, 3, requires_grad=True).exp()  # recorded again
    assert session.recorder._mode_on is False
    assert graphwalk.record(after.grad_fn) is not None


def test_a_module_whose_forward_has_no_python_code_is_recorded():
    class Wrapped(nn.Module):
        forward = staticmethod(torch.tanh)  # a builtin: no __code__

    x = torch.randn(2, 3, requires_grad=True)
    with Session():
        out = Wrapped()(x)  # still recorded
    assert graphwalk.record(out.grad_fn) is not None
