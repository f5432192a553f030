"""Which values are modules, optimizers and scalers is decided by what the program does with them,
never by their names; with no such fact the answer stays unknown (module_values, calls)."""

from __future__ import annotations

import ast

from fixer.analysis.calls import optimizer_calls
from fixer.analysis.scalers import is_scaler
from fixer.analysis.graph import Kind, facts
from fixer.analysis.module_values import holds_module, kept_on_module
from fixer.analysis.scopes import scopes
from fixer.context import FileContext

SOURCE = """import torch
from torch import nn


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(3, 4)
        self.extra = self.first.weight.sum()
        self.scale = nn.Parameter(torch.ones(1))


class Runner:
    def __init__(self, part, data):
        self.part, self.data = part, data
        self.opt = torch.optim.SGD(part.parameters(), lr=0.1)


def fit(q, batches, z):
    w = torch.optim.SGD(q.parameters(), lr=0.1)
    for x in batches:
        out = q(x)
        other = z(x)
        w.zero_grad()
        out.sum().backward()
        w.step()


def score(model, x):
    return model(x)


def amp(s, loss, k):
    s.scale(loss).backward()
    s.unscale_(k)
"""


def _context() -> tuple[FileContext, dict[str, object]]:
    ctx = FileContext("t.py", SOURCE, ast.parse(SOURCE))
    return ctx, {getattr(s.node, "name", "<module>"): s for s in scopes(ctx)}


def test_a_parameter_used_as_only_a_module_is_used_is_a_module_whatever_its_name():
    ctx, by_name = _context()
    fit = by_name["fit"]
    assert holds_module(ctx, fit, "q")  # its parameters go to an optimizer
    assert not holds_module(ctx, fit, "z")  # called, nothing more: unknown, not a module
    assert not holds_module(ctx, by_name["score"], "model")  # named like one, with no fact: unknown
    loop = next(n for n in ast.walk(fit.node) if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "out")
    other = next(n for n in ast.walk(fit.node) if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "other")
    assert facts(ctx, fit).kind(loop.value, loop) == Kind.GRAPH
    assert facts(ctx, fit).kind(other.value, other) == Kind.UNKNOWN


def test_a_field_given_a_module_at_construction_is_a_module():
    ctx, _ = _context()
    runner_init = next(s for s in scopes(ctx) if s.class_node is not None and s.class_node.name == "Runner")
    assert holds_module(ctx, runner_init, "self.part")  # __init__ hands its parameters to an optimizer
    assert not holds_module(ctx, runner_init, "self.data")


def test_a_tensor_kept_on_a_module_is_known_by_its_store_not_its_name():
    ctx, _ = _context()
    assert kept_on_module(ctx, "extra")
    assert not kept_on_module(ctx, "first") and not kept_on_module(ctx, "scale")  # a module, a parameter


def test_optimizers_and_scalers_are_known_by_their_protocol():
    ctx, by_name = _context()
    steps = [c for c in optimizer_calls(ctx, by_name["fit"]) if c.kind == "step"]
    assert [c.owner for c in steps] == ["w"]  # zero_grad and step on one receiver
    amp = by_name["amp"]
    receiver = next(n.func.value for n in ast.walk(amp.node) if isinstance(n, ast.Call) and ast.unparse(n.func) == "s.unscale_")
    assert is_scaler(ctx, receiver)


HELPER = """import torch
from torch import nn


class Helper:
    def __init__(self, owner):
        self.owner = owner

    def step(self, x):
        loss = self.owner.net(x).sum()
        loss.backward()
        self.owner.opt.step()


class Runner:
    def __init__(self):
        self.net = nn.Linear(3, 1)
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def fit(self, x):
        helper = Helper(self)
        helper.step(x)


def update(w, loss):
    loss.backward()
    w.step()


layer = nn.Linear(3, 1)
update(torch.optim.SGD(layer.parameters(), lr=0.1), layer(torch.ones(3)).sum())
"""


def test_fields_of_an_instance_and_parameters_given_an_optimizer_are_known_through_the_program():
    ctx = FileContext("t.py", HELPER, ast.parse(HELPER))
    step = next(s for s in scopes(ctx) if getattr(s.node, "name", "") == "step")
    assert holds_module(ctx, step, "self.owner.net")  # Helper(self) in Runner: Runner's module field
    assert [c.owner for c in optimizer_calls(ctx, step) if c.kind == "step"] == ["self.owner.opt"]
    update = next(s for s in scopes(ctx) if getattr(s.node, "name", "") == "update")
    assert [c.owner for c in optimizer_calls(ctx, update) if c.kind == "step"] == ["w"]  # its one caller passes SGD(...)
