"""GF112 on a memo a helper method fills on demand (``if self.table is None: self.rebuild()``): the
first forward builds the graph of the object's parameters, every later forward reuses it, and the
second training step walks the graph the first freed. The first step's graph reaches the loss
through a list the model appends its outputs to (``outs.append(...)`` ... ``torch.stack(outs)``).
The memo fix (store it only while the parameters are frozen) is withheld: the caller reads the
field after the call, which would then find it empty. A helper also called from outside the class
may be called anew on every step: nothing is reported."""

from __future__ import annotations

from tests.program_findings import run_program, text_findings

PROGRAM = """
import torch
from torch import nn


class ScaledMix(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.raw = nn.Parameter(torch.randn(width, width) * 0.2)
        self.table = None

    def rebuild(self):
        self.table = torch.softmax(self.raw, dim=1)

    def forward(self, x):
        if self.table is None:
            self.rebuild()
        return x @ self.table


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = ScaledMix(5)
        self.out = nn.Linear(5, 1)

    def forward(self, xs):
        outs = []
        for x in xs:
            outs.append(self.out(self.mix(x)))
        return torch.stack(outs)


model = Stack()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    {REFRESH}
    loss = model(torch.randn(4, 2, 5)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def _findings(refresh: str) -> list:
    text = PROGRAM.replace("{REFRESH}", refresh)
    return [(d.code, d.line, bool(d.fix)) for d in text_findings(text.encode())]


def test_a_memo_filled_on_demand_by_a_helper_is_reported_without_a_fix(tmp_path) -> None:
    path = tmp_path / "memo.py"
    path.write_text(PROGRAM.replace("{REFRESH}", "pass"))
    assert "backward through the graph a second time" in run_program(path).stderr
    assert _findings("pass") == [("GF112", 13, False)]


def test_a_helper_also_called_from_outside_the_class_reports_nothing(tmp_path) -> None:
    path = tmp_path / "refreshed.py"
    path.write_text(PROGRAM.replace("{REFRESH}", "model.mix.rebuild()"))
    assert run_program(path).returncode == 0
    assert _findings("model.mix.rebuild()") == []
