"""GF104 when the loop runs several forward passes before one backward (backpropagation through a
sequence): the state a module keeps between calls carries the gradient between those calls, so
detaching it would change the training; the finding says to reset it at the sequence's start and
offers no edit. One backward per forward keeps the detach fix."""

from __future__ import annotations

from tests.program_findings import text_findings

PROGRAM = """
import torch
from torch import nn


class Evolving(nn.Module):
    def __init__(self):
        super().__init__()
        self.start = nn.Parameter(torch.randn(4, 4))
        self.cell = nn.Linear(4, 4)
        self.weight = None

    def forward(self, x):
        w = self.start if self.weight is None else self.weight
        w = torch.tanh(self.cell(w))
        self.weight = w
        return x @ w


model = Evolving()
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
sequence = [torch.randn(3, 4) for _ in range(5)]
for epoch in range(3):
{BODY}
"""
THROUGH_SEQUENCE = """    cost = 0
    for x in sequence:
        cost = cost + model(x).pow(2).mean()
    optimizer.zero_grad()
    cost.backward()
    optimizer.step()"""
PER_STEP = """    for x in sequence:
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()"""


def _findings(body: str) -> list:
    text = PROGRAM.replace("{BODY}", body)
    return [(d.code, d.line, bool(d.fix), "reset it at the start of each sequence" in d.message) for d in text_findings(text.encode())]


def test_a_state_carried_through_a_sequence_gets_no_detach() -> None:
    assert _findings(THROUGH_SEQUENCE) == [("GF104", 16, False, True)]


def test_one_backward_per_forward_keeps_the_detach() -> None:
    assert _findings(PER_STEP) == [("GF104", 16, True, False)]
