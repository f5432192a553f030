"""GF105's retain_graph=True when parameters change between the two backward calls: right where
the shared evaluation saved none of the stepped weights (one layer on data), wrong where it saved
them (a deeper network, or a layer applied to a graph): the kept graph would meet the weights
changed in place ('modified by an inplace operation'). There the finding carries no fix. Each
program is run too, so that the claim about it is the program's own behaviour."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fixer.engine import Options, process_source
from fixer.registry import all_rules

PROGRAM = """
import torch
from torch import nn

torch.manual_seed(0)
encoder = {encoder}
head = nn.Linear(4, 1)
encoder_opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
head_opt = torch.optim.SGD(head.parameters(), lr=0.1)
inputs, codes, targets = torch.randn(12, 5), torch.randn(12, 4), torch.randn(12, 1)
for step in range(3):
    features = encoder(inputs)
    code_loss = ((features - codes) ** 2).mean()
    head_loss = ((head(features) - targets) ** 2).mean()
    encoder_opt.zero_grad()
    code_loss.backward({retain})
    {stepped}.step()
    head_opt.zero_grad()
    head_loss.backward()
    head_opt.step()
print("done")
"""
SHALLOW = "nn.Sequential(nn.Linear(5, 4), nn.Tanh())"  # saves the inputs (data) and the tanh output
DEEP = "nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 4))"  # the second layer saves its weight


def _gf105(encoder: str, stepped: str):
    source = textwrap.dedent(PROGRAM).format(encoder=encoder, retain="", stepped=stepped)
    result = process_source("t.py", source.encode(), Options(rules=tuple(all_rules()), fix=False, unsafe=True))
    return [d for d in result.diagnostics if d.code == "GF105"]


def _runs(encoder: str, stepped: str, retain: str) -> str:
    source = textwrap.dedent(PROGRAM).format(encoder=encoder, retain=retain, stepped=stepped)
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120)
    return "ok" if done.returncode == 0 else ("inplace" if "modified by an inplace operation" in done.stderr else done.stderr[-300:])


@pytest.mark.parametrize(
    "encoder, stepped, retain_runs, fixed",
    [
        (SHALLOW, "encoder_opt", "ok", True),  # the step changes weights the graph did not save
        (DEEP, "encoder_opt", "inplace", False),  # it changes the second layer's saved weight
    ],
)
def test_retain_graph_is_offered_only_where_the_step_changes_nothing_the_graph_saved(encoder, stepped, retain_runs, fixed):
    found = _gf105(encoder, stepped)
    assert len(found) == 1
    assert (found[0].fix is not None) is fixed, found[0].message
    assert _runs(encoder, stepped, "retain_graph=True") == retain_runs  # what the fix would do, run
    if not fixed:
        assert "modified by an inplace operation" in found[0].message
