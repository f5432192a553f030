"""GF108 through a helper that backpropagates a loss and steps an optimizer (``apply(loss, opt)``):
a loss built through a module that an earlier helper call stepped raises "modified by an inplace
operation" at its own helper call. Reported there, without a fix (moving or copying parts of a
helper call is not proven); with the updates in the other order, nothing is reported."""

from __future__ import annotations

from tests.program_findings import run_program, text_findings

PROGRAM = """
import torch
from torch import nn


def apply(loss, optimizer):
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(3, 6), nn.Tanh())
scorer = nn.Linear(6, 1)
encoder_opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
scorer_opt = torch.optim.SGD(scorer.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(8, 3)
    codes = encoder(x)
    encoder_loss = -scorer(codes).mean() + codes.pow(2).mean()
    scorer_loss = (scorer(codes.detach()) - 1.0).pow(2).mean()
    {UPDATES}
"""

WRONG = "apply(scorer_loss, scorer_opt)\n    apply(encoder_loss, encoder_opt)"
RIGHT = "apply(encoder_loss, encoder_opt)\n    apply(scorer_loss, scorer_opt)"


def _findings(updates: str) -> list:
    return [(d.code, d.line, bool(d.fix)) for d in text_findings(PROGRAM.replace("{UPDATES}", updates).encode())]


def test_a_helper_step_before_a_helper_backward_of_a_stale_forward_is_reported(tmp_path) -> None:
    path = tmp_path / "wrong.py"
    path.write_text(PROGRAM.replace("{UPDATES}", WRONG))
    assert "modified by an inplace operation" in run_program(path).stderr
    assert _findings(WRONG) == [("GF108", 23, False)]


def test_the_updates_in_the_other_order_report_nothing(tmp_path) -> None:
    path = tmp_path / "right.py"
    path.write_text(PROGRAM.replace("{UPDATES}", RIGHT))
    assert run_program(path).returncode == 0
    assert _findings(RIGHT) == []
