"""Where one rule defers to another, it defers only for the code the other rule reports."""

from __future__ import annotations

from fixer.engine import Options, process_source
from fixer.registry import all_rules

GAN_STEP = """
def gan_step(real):
    gen, disc = torch.nn.Linear(2, 3), torch.nn.Linear(3, 1)
    gopt = torch.optim.Adam(gen.parameters(), lr=1e-3)
    dopt = torch.optim.Adam(disc.parameters(), lr=1e-3)
    for _ in range(3):
        fake = gen(torch.randn(4, 2))
        dopt.zero_grad()
        dloss = disc(fake).mean() - disc(real).mean()
        dloss.backward()
        dopt.step()
        gopt.zero_grad()
        gloss = -disc(fake).mean()
        gloss.backward()
        gopt.step()
"""
SHARED_PAIR = """
w = torch.randn(3, 3, requires_grad=True)
hid = torch.sigmoid(torch.randn(5, 3) @ w)
first = hid[:, 0] * 2
second = hid.sum()
torch.autograd.backward(first, grad_tensors=torch.ones(5))
torch.autograd.backward(second)
"""


def _codes(source: str) -> list[tuple[int, str]]:
    result = process_source("t.py", source.encode(), Options(rules=all_rules()))
    assert not result.errors
    return sorted((d.line, d.code) for d in result.diagnostics)


def test_a_gan_step_elsewhere_does_not_hide_a_shared_graph_backward():
    """GF105 defers to GF103 inside the GAN step, not in the whole file (found by fuzzing: the
    first run reported only GF103, and --fix then also changed the other backward)."""
    alone = _codes("import torch\n" + SHARED_PAIR)
    with_gan = _codes("import torch\n" + GAN_STEP + SHARED_PAIR)
    offset = GAN_STEP.count("\n")
    assert [code for _, code in alone] == ["GF105"]
    assert ("GF103" in {code for _, code in with_gan}) and [(line - offset, code) for line, code in with_gan if code == "GF105"] == alone


def test_inside_the_gan_step_only_gf103_reports():
    codes = {code for _, code in _codes("import torch\n" + GAN_STEP)}
    assert codes == {"GF103"}
