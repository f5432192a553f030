"""Which module made a tensor's graph (``producers``), and whether a use reaches a backward
through graph-carrying sub-expressions only (``flows_to``)."""

from __future__ import annotations

import ast
import textwrap

from fixer.analysis.calls import backward_calls
from fixer.analysis.gan_roles import producers
from fixer.analysis.gan_steps import callable_uses, flows_to
from fixer.analysis.graph import facts
from fixer.analysis.scopes import scopes
from fixer.context import FileContext

SOURCE = """
import torch, torch.nn as nn
G = nn.Linear(4, 6)
D = nn.Linear(6, 1)
buf = Buffer()
obs = torch.randn(8, 3)
z = Variable(Tensor(np.random.normal(0, 1, (5, 4))))
batch = buf.sample(8)
state, action = buf.sample(8)
moved = obs.to(device)
fake = G(z)
shaped = fake.view(5, -1) * 2
joined = torch.cat([G(z), obs])
detached = G(z).detach()
helped = helper(G(z))
decoded = G.decode(z)
with torch.no_grad():
    quiet = G(z)
"""


def _producers() -> dict[str, frozenset[str]]:
    ctx = FileContext("t.py", textwrap.dedent(SOURCE))
    scope = scopes(ctx)[0]
    graph = facts(ctx, scope)
    end = ctx.tree.body[-1]
    return {name: producers(ctx, graph, ast.Name(id=name, ctx=ast.Load()), end) for name in graph.assignments}


def test_data_and_opaque_values_have_no_producer():
    found = _producers()
    for name in ("obs", "z", "batch", "state", "action", "moved", "detached", "helped", "quiet", "buf"):
        assert found[name] == frozenset(), name


def test_module_outputs_and_tensor_methods_on_them():
    found = _producers()
    for name in ("fake", "shaped", "joined", "decoded"):
        assert found[name] == frozenset({"G"}), name


def test_flow_stops_at_detach_and_data():
    ctx = FileContext(
        "t.py",
        textwrap.dedent(
            """
            def step(E, G, D, x, opt):
                z = E(x)
                fake = G(z).detach()
                pred = D(x).detach()
                x_hat = (x.data + fake.data).requires_grad_()
                kept = D(fake)
                loss = D(x_hat).mean() + pred.mean() + kept.mean()
                loss.backward()
            """
        ),
    )
    scope = scopes(ctx)[1]
    graph = facts(ctx, scope)
    call = backward_calls(ctx, scope)[0]
    reached = {ctx.text(u.call) for u in callable_uses(ctx, scope, graph) if flows_to(ctx, graph, scope, u, call)}
    assert reached == {"D(fake)", "D(x_hat)"}
