"""GF108's proof and fix conditions (fixer/analysis/stale_forward.py) on small sources: where it
must report without a fix, and where another rule or nothing at all must speak instead."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from fixer.engine import Options, process_source
from fixer.registry import all_rules, by_code

HEAD = """
import torch
from torch import nn

actor = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
critic = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
actor_opt = torch.optim.SGD(actor.parameters(), lr=0.1)
critic_opt = {critic_opt}
"""
LOOP = """
for it in range(3):
    state, action, target = torch.randn(16, 3), torch.randn(16, 1), torch.randn(16, 1)
    q = critic(torch.cat([state, action], 1))
    q_new = critic(torch.cat([state, {new_action}], 1))
    critic_loss = ((q - target) ** 2).mean()
    actor_loss = -q_new.mean()
    critic_opt.zero_grad()
    critic_loss.backward({retain})
    critic_opt.step()
    actor_opt.zero_grad()
    actor_loss.backward()
    actor_opt.step()
"""


def _findings(critic_opt="torch.optim.SGD(critic.parameters(), lr=0.1)", new_action="actor(state)", retain="", loop=LOOP):
    source = textwrap.dedent(HEAD).format(critic_opt=critic_opt) + loop.format(new_action=new_action, retain=retain)
    result = process_source("t.py", source.encode(), Options(rules=tuple(all_rules()), fix=False, unsafe=True))
    return [(d.code, d.line, d.fix is not None) for d in result.diagnostics]


def test_proven_walk_is_fixed():
    assert _findings() == [("GF108", 20, True)]


def test_a_sampling_statement_is_not_copied():
    assert _findings(new_action="actor(state) + 0.1 * torch.randn(16, 1)") == [("GF108", 20, False)]


def test_optimizer_over_unknown_parameters_gives_no_finding():
    assert _findings(critic_opt="torch.optim.SGD(make_params(critic), lr=0.1)") == []


def test_data_input_through_two_layers_is_found():
    # the critic's second layer saves its weight for its input's gradient (the first layer's
    # output requires grad) even on data: this program raises too
    assert _findings(new_action="action") == [("GF108", 20, True)]


def test_data_input_of_one_layer_gives_no_finding():
    # a single layer on data saves only its input: the step changes nothing the backward reads
    single = "single = nn.Linear(4, 1)\nsingle_opt = torch.optim.SGD(single.parameters(), lr=0.1)\n"
    loop = single + LOOP.replace("critic(", "single(").replace("critic_opt", "single_opt")
    assert _findings(new_action="action", loop=loop) == []
    source = textwrap.dedent(HEAD).format(critic_opt="None") + loop.format(new_action="action", retain="")
    assert subprocess.run([sys.executable, "-c", source], capture_output=True, timeout=120).returncode == 0


def test_step_between_two_backwards_of_one_retained_graph():
    """``g_loss.backward(retain_graph=True); opt_g.step(); info_loss.backward()`` through one
    generator output: the step changes weights the retained graph saved. The fix recomputes the
    info loss after the step; the retain then goes (GF302), and the program runs."""
    source = textwrap.dedent(HEAD).format(critic_opt="torch.optim.SGD(critic.parameters(), lr=0.1)") + textwrap.dedent("""
        for it in range(3):
            state = torch.randn(16, 3)
            action = actor(state)
            q = critic(torch.cat([state, action], 1))
            actor_loss = -q.mean()
            smooth = action.pow(2).mean()
            actor_opt.zero_grad()
            actor_loss.backward(retain_graph=True)
            actor_opt.step()
            critic_opt.zero_grad()
            smooth.backward()
            critic_opt.step()
    """)
    crashed = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120)
    assert "modified by an inplace operation" in crashed.stderr
    together = process_source("t.py", source.encode(), Options(rules=tuple(all_rules()), fix=True, unsafe=True))
    assert [(d.code, d.line) for d in together.diagnostics] == [("GF108", 20)] and together.remaining == []
    assert "actor_loss.backward()" in together.fixed and together.fixed.count("action = actor(state)") == 2
    run = subprocess.run([sys.executable, "-c", together.fixed], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_graph_freed_by_an_earlier_backward_is_left_to_gf105():
    shared = LOOP.replace("q = critic(torch.cat([state, action], 1))", "q = q_new = critic(torch.cat([state, {new_action}], 1))")
    shared = shared.replace("    q_new = critic(torch.cat([state, {new_action}], 1))\n", "")
    assert [code for code, _, _ in _findings(loop=shared)] == ["GF105"]
    assert [code for code, _, _ in _findings(loop=shared, retain="retain_graph=True")] == ["GF108"]


def test_the_fix_also_rebuilds_a_stepped_forward_on_data():
    """``q`` (the critic on data) saves its second layer's weight too: a fix recomputing only
    ``q_new`` would still raise."""
    both = LOOP.replace("actor_loss = -q_new.mean()", "actor_loss = -q_new.mean() + 0.0 * q.mean()")
    source = textwrap.dedent(HEAD).format(critic_opt="torch.optim.SGD(critic.parameters(), lr=0.1)")
    source += both.format(new_action="actor(state)", retain="retain_graph=True")
    alone = process_source("t.py", source.encode(), Options(rules=(by_code("GF108"),), fix=True, unsafe=True))
    tail = alone.fixed.split("actor_opt.zero_grad()")[-1]
    assert "q = critic(torch.cat([state, action], 1))" in tail and "q_new = critic(" in tail
    # With every rule, the recompute leaves the first backward's retain_graph=True needless (GF302):
    # the next pass removes it, and the program runs with nothing left to report.
    together = process_source("t.py", source.encode(), Options(rules=tuple(all_rules()), fix=True, unsafe=True))
    assert together.changed and together.remaining == []
    assert together.fixed == alone.fixed.replace("critic_loss.backward(retain_graph=True)", "critic_loss.backward()")
    run = subprocess.run([sys.executable, "-c", together.fixed], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_a_band_aid_still_needed_is_kept():
    """GF302 removes the first backward's retain_graph=True only when nothing walks its graph
    again: the actor's loss still walks ``q``'s graph here, so the recompute cannot drop it."""
    both = LOOP.replace("actor_loss = -q_new.mean()", "actor_loss = -q_new.mean() + 0.0 * q.mean()")
    source = textwrap.dedent(HEAD).format(critic_opt="torch.optim.SGD(critic.parameters(), lr=0.1)")
    source += both.format(new_action="actor(state)", retain="retain_graph=True")
    alone = process_source("t.py", source.encode(), Options(rules=(by_code("GF302"),), fix=True, unsafe=True))
    assert not alone.diagnostics
