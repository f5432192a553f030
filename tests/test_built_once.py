"""Graphs built once and walked by every training iteration (GF110, GF111, GF112): where the
finding stands but the fix's precondition is not proven, the finding comes without a fix."""

from __future__ import annotations

from fixer.engine import Options, process_source
from fixer.registry import by_code

MEMO_READ_AFTER_STORE = '''
import torch
from torch import nn


class Basis(nn.Module):
    def __init__(self):
        super().__init__()
        self.freq = nn.Parameter(torch.ones(3))
        self.memo = None

    def forward(self, n):
        if self.memo is None:
            self.memo = torch.sin(torch.arange(n, dtype=torch.float32)[:, None] * self.freq)
        return self.memo[:n]


basis = Basis()
optimizer = torch.optim.SGD(basis.parameters(), lr=0.1)
for step in range(3):
    loss = basis(4).pow(2).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
'''


def _fixed(source: str, code: str):
    return process_source("t.py", source.encode(), Options(rules=(by_code(code),), fix=True, unsafe=True))


def test_memo_read_after_its_store_is_reported_without_a_fix():
    result = _fixed(MEMO_READ_AFTER_STORE, "GF112")
    assert [(d.code, d.line) for d in result.remaining] == [("GF112", 14)]
    assert not result.changed


def test_memo_returning_its_local_value_is_fixed():
    source = MEMO_READ_AFTER_STORE.replace(
        "        if self.memo is None:\n            self.memo = torch.sin(torch.arange(n, dtype=torch.float32)[:, None] * self.freq)\n        return self.memo[:n]\n",
        "        if self.memo is not None:\n            return self.memo[:n]\n        table = torch.sin(torch.arange(n, dtype=torch.float32)[:, None] * self.freq)\n"
        "        self.memo = table\n        return table\n",
    )
    result = _fixed(source, "GF112")
    assert result.remaining == []
    assert "        if not self.freq.requires_grad:\n            self.memo = table\n" in result.fixed
