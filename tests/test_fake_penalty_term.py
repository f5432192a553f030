"""GF103 offers `.detach()` on the discriminator's application of the fake only when nothing else in
the discriminator loss reads the fake's graph. A gradient penalty on an interpolate of real and
fake is such a reader: with only `critic(fake)` detached (and the retain removed) the critic's
backward still frees the generator's graph through the penalty, and the generator step raises.
The finding stays, without a fix; where the penalty is given the fake detached already, the fix
is offered and the fixed program runs."""

from __future__ import annotations

from tests.program_findings import run_program, text_findings

PROGRAM = """
import torch
from torch import nn


def penalty(critic, real, fake):
    mix = torch.rand(real.size(0), 1)
    points = (mix * real + (1 - mix) * fake).requires_grad_(True)
    scores = critic(points)
    grads = torch.autograd.grad(scores.sum(), points, create_graph=True)[0]
    return ((grads.norm(2, dim=1) - 1) ** 2).mean()


torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 3))
critic = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
opt_c = torch.optim.Adam(critic.parameters(), lr=1e-3)
for step in range(3):
    real = torch.randn(6, 3)
    fake = generator(torch.randn(6, 2))
    critic_loss = critic(fake).mean() - critic(real).mean() + 10 * penalty(critic, real, {PENALTY_FAKE})
    opt_c.zero_grad()
    critic_loss.backward(retain_graph=True)
    opt_c.step()
    generator_loss = -critic(fake).mean()
    opt_g.zero_grad()
    generator_loss.backward()
    opt_g.step()
print(round(generator_loss.item(), 4))
"""


def _program(penalty_fake: str) -> bytes:
    return PROGRAM.replace("{PENALTY_FAKE}", penalty_fake).encode()


def test_a_penalty_on_the_undetached_fake_withholds_the_detach(tmp_path) -> None:
    found = [(d.code, bool(d.fix)) for d in text_findings(_program("fake"))]
    assert found == [("GF103", False)]
    wrong = tmp_path / "wrong.py"  # the fix this withholds: critic(fake) detached, the retain removed
    wrong.write_bytes(_program("fake").replace(b"critic(fake).mean() - critic", b"critic(fake.detach()).mean() - critic")
                      .replace(b"backward(retain_graph=True)", b"backward()"))
    assert "backward through the graph a second time" in run_program(wrong).stderr


def test_a_penalty_given_the_fake_detached_keeps_the_fix(tmp_path) -> None:
    findings = text_findings(_program("fake.detach()"))
    assert [(d.code, bool(d.fix)) for d in findings] == [("GF103", True)]
    fixed = _program("fake.detach()").decode()
    for edit in sorted((e for d in findings for e in d.fix.edits), key=lambda e: -e.start):
        fixed = fixed[: edit.start] + edit.text + fixed[edit.end:]
    path = tmp_path / "fixed.py"
    path.write_text(fixed)
    fixed = fixed.encode()
    assert b"fake.detach()).mean() - critic" in fixed and b"retain_graph" not in fixed
    assert run_program(path).returncode == 0
