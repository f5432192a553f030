"""GF301 on a kept value that is a dict of tensors (a training step's outputs returned by a method):
reported, but without `.detach()` / `.item()` on the dict, which would raise AttributeError; a
tensor returned by the same method keeps its fix."""

from __future__ import annotations

from tests.program_findings import text_findings

PROGRAM = """
import torch
from torch import nn


class Wrapper:
    def __init__(self):
        self.net = nn.Linear(3, 1)
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.1)

    def training_step(self, x):
        loss = self.net(x).pow(2).mean()
        return {RETURNED}


wrapper = Wrapper()
outputs = []
for x in torch.randn(5, 4, 3):
    wrapper.optimizer.zero_grad()
    output = wrapper.training_step(x)
    {LOSS}.backward()
    wrapper.optimizer.step()
    outputs.append(output)
"""


def _findings(returned: str, loss: str) -> list:
    text = PROGRAM.replace("{RETURNED}", returned).replace("{LOSS}", loss)
    return [(d.code, d.line, bool(d.fix)) for d in text_findings(text.encode())]


def test_a_kept_dict_of_tensors_is_reported_without_a_fix_that_would_raise() -> None:
    assert _findings('{"loss": loss, "metrics": {"l1": loss.abs()}}', 'output["loss"]') == [("GF301", 23, False)]


def test_a_kept_tensor_returned_by_the_same_method_keeps_its_fix() -> None:
    assert _findings("loss", "output") == [("GF301", 23, True)]
