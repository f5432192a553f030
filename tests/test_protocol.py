"""Unit tests of the per-iteration optimizer protocol model (fixer/analysis/protocol.py)."""

from __future__ import annotations

import ast
import textwrap

from fixer.analysis.call_events import block_events
from fixer.analysis.protocol import optimizer_params, zeroes_for
from fixer.analysis.scopes import scopes
from fixer.context import FileContext


def _ctx(source: str) -> FileContext:
    return FileContext("t.py", textwrap.dedent(source))


def _loop_events(ctx: FileContext) -> str:
    scope = scopes(ctx)[0]
    loop = next(n for n in ctx.tree.body if isinstance(n, ast.For))
    return " ".join(e.kind[0] + ("?" if e.conditional else "") for e in block_events(ctx, scope, loop.body))


def test_events_in_order_with_conditions():
    ctx = _ctx(
        """
        for i, (x, y) in enumerate(data):
            loss = crit(model(x), y)
            scaler.scale(loss).backward()
            if (i + 1) % 4 == 0:
                scaler.step(opt)
                opt.zero_grad()
            sched.step()
        """
    )
    assert _loop_events(ctx) == "b s? z?"


def test_nested_loop_events_are_conditional():
    ctx = _ctx(
        """
        for epoch in range(3):
            opt.zero_grad()
            for x in data:
                model(x).sum().backward()
            opt.step()
        """
    )
    assert _loop_events(ctx) == "z b? s"


def test_optimizer_params_and_aliases():
    ctx = _ctx(
        """
        import torch
        class T:
            def __init__(self, model, head):
                self.model = model
                self.opt = torch.optim.Adam(list(model.parameters()) + list(head.fc.parameters()), lr=1e-3)
        g_opt = torch.optim.SGD(gen.parameters(), lr=0.1)
        d_opt = torch.optim.SGD(disc.parameters(), lr=0.1)
        any_opt = torch.optim.SGD(params, lr=0.1)
        """
    )
    owners = optimizer_params(ctx)
    assert owners["self.opt"] == frozenset({"model", "head.fc", "self.model"})
    assert owners["g_opt"] == frozenset({"gen"})
    assert owners["any_opt"] is None


def test_optimizer_params_named_parameter_list_equals_inline():
    ctx = _ctx(
        """
        import itertools, torch
        ge = itertools.chain(gen.parameters(), enc.parameters())
        opt_ge = torch.optim.Adam(ge, lr=1e-3)
        opt_inline = torch.optim.Adam(itertools.chain(gen.parameters(), enc.parameters()), lr=1e-3)
        c_params = [*critic.parameters(), *encoder.parameters()]
        opt_c = torch.optim.Adam(c_params, lr=1e-3)
        twice = list(a.parameters())
        twice = list(b.parameters())
        opt_twice = torch.optim.Adam(twice)
        def build(params):
            return torch.optim.Adam(params)
        grown = list(a.parameters())
        grown += list(b.parameters())
        opt_grown = torch.optim.Adam(grown)
        """
    )
    owners = optimizer_params(ctx)
    assert owners["opt_ge"] == owners["opt_inline"] == frozenset({"gen", "enc"})
    assert owners["opt_c"] == frozenset({"critic", "encoder"})
    assert owners["opt_twice"] is None  # assigned twice: which one reaches is not asked here
    assert owners["opt_grown"] is None
    assert owners.get("build") is None


def test_zeroes_for():
    ctx = _ctx(
        """
        import torch
        g_opt = torch.optim.SGD(gen.parameters(), lr=0.1)
        d_opt = torch.optim.SGD(disc.parameters(), lr=0.1)
        any_opt = torch.optim.SGD(params, lr=0.1)
        """
    )
    assert zeroes_for(ctx, "g_opt", "g_opt") is True
    assert zeroes_for(ctx, "gen", "g_opt") is True
    assert zeroes_for(ctx, "d_opt", "g_opt") is False
    assert zeroes_for(ctx, "disc", "g_opt") is None  # disc might contain gen: unknown
    assert zeroes_for(ctx, "d_opt", "any_opt") is None
