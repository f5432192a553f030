"""## What it does
Finds GAN training steps whose discriminator loss is computed on the generator's output without
`.detach()` (`D(fake)`), backpropagated and stepped, while the generator step that follows makes
its own fake (`fake = G(z)` again) and backpropagates through that one. Nothing crashes: the
discriminator's backward walks on through the generator's whole graph for nothing. Common in
WGAN-GP code that regenerates the fake every `n_critic` steps.

The roles are proven as for GF103 (`fake-not-detached-for-discriminator`): the discriminator
step's optimizer is built from the callable's parameters and not the producer's, the generator
step's optimizer from the producer's and not the callable's. The rule stays silent when anything
else in the discriminator step reads the fake's graph (a gradient penalty differentiating with
respect to `fake` itself, as in WGAN-div, needs it), and when the generator step reuses the same
fake (GF103 reports that: it crashes).

## Why is this bad?
The discriminator's backward computes gradients for every generator parameter on every
discriminator step, a full backward pass through the generator that no step uses. Where the
generator's gradients are not zeroed between that backward and the generator's own backward,
they are added to the generator's gradients, so the generator also descends the discriminator's
loss: it is pushed to make its fakes *easier* to spot.

## Example
```python
fake = G(z)
d_loss = -D(real).mean() + D(fake).mean()
opt_d.zero_grad(); d_loss.backward(); opt_d.step()
fake = G(z)
g_loss = -D(fake).mean()
opt_g.zero_grad(); g_loss.backward(); opt_g.step()
```

## Use instead
```python
d_loss = -D(real).mean() + D(fake.detach()).mean()
```

## Fix safety
Safe when the generator's gradients are zeroed (`opt_g.zero_grad()`, `G.zero_grad()`, an
optimizer over the same parameters) after the discriminator's backward and before the
generator's, unconditionally: the discriminator's gradients are those of the same loss, the
generator's were discarded anyway, so every gradient the steps use and every parameter is
unchanged; only the wasted backward is gone. Unsafe otherwise: the generator no longer receives
the discriminator loss's gradients, so its gradients and parameters change, to those of its own
loss alone (the bug removed).
"""

from __future__ import annotations

from typing import Iterator

from fixer.analysis.calls import BackwardCall, OptimizerCall
from fixer.analysis.gan_steps import Use, discriminator_generator_pairs, gan_backwards
from fixer.analysis.regenerated_fakes import undetached_uses, zeroed_between
from fixer.analysis.scopes import Scope, scopes
from fixer.context import FileContext
from fixer.rule import Applicability, Diagnostic, Edit, Rule


class DiscriminatorBackwardIntoGenerator(Rule):
    code = "GF303"
    name = "discriminator-backward-into-generator"
    summary = "The discriminator step backpropagates through the generator, whose own step makes a new fake"
    fix_safety = "mixed"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        reported: set[int] = set()
        for scope in scopes(ctx):
            gan = gan_backwards(ctx, scope)
            if gan is None:
                continue
            calls, steps = gan
            for first, second in discriminator_generator_pairs(ctx, scope, calls):
                found = undetached_uses(ctx, scope, first, second, steps)
                if found and not any(id(u.arg) in reported for u in found[0]):
                    uses, step_g = found
                    reported.update(id(u.arg) for u in uses)
                    yield self._report(ctx, scope, uses, first, second, step_g)

    def _report(self, ctx: FileContext, scope: Scope, uses: list[Use], first: BackwardCall, second: BackwardCall, step_g: OptimizerCall) -> Diagnostic:
        text = ctx.text(uses[0].arg)
        safe = zeroed_between(ctx, scope, first, second, step_g.owner)
        return self.diagnostic(
            ctx,
            uses[0].arg,
            f"The discriminator loss backpropagates through `{text}` into the generator, whose step makes and "
            f"backpropagates a fake of its own: a wasted backward through the generator"
            + ("" if safe else ", whose gradients it adds to the generator's (they are not zeroed in between)")
            + f"; use `{text}.detach()` in the discriminator step",
            [Edit(*ctx.span(u.arg), f"{ctx.text(u.arg)}.detach()") for u in uses],
            Applicability.SAFE if safe else Applicability.UNSAFE,
            title=f"Detach `{text}` for the discriminator",
        )
