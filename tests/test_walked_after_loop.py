"""GF102's recompute-in-the-loop fix is withheld when a backward after the loop walks the value
too (a critic trained on a sample several times, then the sampler's own step on the same sample):
the name would hold the last pass's value, whose graph that pass's backward freed. Read after the
loop only for numbers, it is not walked there (fixtures/subgraph_built_before_loop/used_after_loop
keeps its recompute)."""

from __future__ import annotations

from tests.program_findings import text_findings

PROGRAM = """
import torch
from torch import nn


class Pair:
    def __init__(self):
        self.sampler = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 3))
        self.judge = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
        self.opt_s = torch.optim.SGD(self.sampler.parameters(), lr=0.01)
        self.opt_j = torch.optim.SGD(self.judge.parameters(), lr=0.01)

    def judge_step(self, sample):
        self.opt_j.zero_grad()
        self.judge(sample).mean().backward()
        self.opt_j.step()

    def sampler_step(self, sample):
        self.opt_s.zero_grad()
        (-self.judge(sample).mean()).backward()
        self.opt_s.step()

    def train_step(self):
        sample = self.sampler(torch.randn(4, 2))
        for _ in range(3):
            self.judge_step(sample)
        {AFTER}


pair = Pair()
for step in range(2):
    pair.train_step()
"""


def _findings(after: str) -> list:
    text = PROGRAM.replace("{AFTER}", after)
    return [(d.code, d.line, bool(d.fix), "a backward after the loop walks" in d.message) for d in text_findings(text.encode())]


def test_a_value_a_backward_walks_after_the_loop_gets_no_recompute() -> None:
    assert _findings("self.sampler_step(sample)") == [("GF102", 24, False, True)]


def test_a_value_read_after_the_loop_for_numbers_is_not_walked_after_it() -> None:
    assert [f[3] for f in _findings("print(float(sample.sum()))")] == [False]
