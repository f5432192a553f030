"""GF301 on a meter whose ``update`` keeps more than its first argument (``stats.update(loss,
terms)`` summing ``loss`` and an element of ``terms``): the call is reported without the call-site
fix that converts the first argument alone, which would leave the terms' graphs kept; the element's
store in the method has its own fix, after which the update keeps only its first argument and the
next pass converts it at the call: fixing converges to numbers everywhere. An ``update`` that keeps
only its first argument keeps the call-site fix."""

from __future__ import annotations

from pathlib import Path

from fixer.engine import Options, process_source
from fixer.registry import all_rules
from tests.program_findings import run_program, text_findings

PROGRAM = """
import torch
from torch import nn


class Stats:
    def __init__(self):
        self.total = 0.0
        self.first = 0.0
        self.count = 0

    def update(self, loss, terms):
        self.total += loss
        {SECOND}
        self.count += 1


model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
stats = Stats()
for x in torch.randn(6, 8, 4):
    out = model(x)
    terms = (out[:, 0].pow(2).mean(), out[:, 1].abs().mean())
    loss = terms[0] + terms[1]
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    stats.update(loss, terms)
print(round(float(stats.total) / stats.count, 4), round(float(stats.first), 4))
"""


def _line(text: str, part: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if part in line)


def _findings(second: str) -> list:
    return [(d.code, d.line, bool(d.fix)) for d in text_findings(PROGRAM.replace("{SECOND}", second).encode())]


def test_an_update_keeping_another_argument_is_reported_without_a_partial_fix() -> None:
    call, store = _line(PROGRAM, "stats.update("), _line(PROGRAM, "{SECOND}")
    assert _findings("self.first += terms[0]") == [("GF301", store, True), ("GF301", call, False)]


def test_fixing_converges_to_numbers_in_the_method_and_at_the_call() -> None:
    text = PROGRAM.replace("{SECOND}", "self.first += terms[0]")
    result = process_source("t.py", text.encode(), Options(rules=tuple(all_rules()), fix=True, unsafe=True))
    assert not result.errors and result.remaining == []
    assert "self.first += terms[0].item()" in result.fixed and "stats.update(loss.item(), terms)" in result.fixed


def test_an_update_keeping_only_its_first_argument_keeps_the_fix() -> None:
    assert _findings("self.first += terms[0].item()") == [("GF301", _line(PROGRAM, "stats.update("), True)]


def test_the_program_runs(tmp_path: Path) -> None:
    path = tmp_path / "stats.py"
    path.write_text(PROGRAM.replace("{SECOND}", "self.first += terms[0]"), encoding="utf-8")
    done = run_program(path)
    assert done.returncode == 0, done.stderr
