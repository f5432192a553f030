"""## What it does
Finds GAN training steps whose discriminator loss is computed on the generator's output without
`.detach()` (`D(fake)`), backpropagated and stepped, while the generator step that follows
backpropagates through the same `fake` (a second call `D(fake)`).

The pattern is recognised by its structure and by who trains what, not by names: one tensor
`fake` made by a module's forward pass (`G(z)`, `G(z).view(...)`, a name assigned from one), the
same callable applied to it twice, the first result reaching a backward call followed by one
optimizer's step, the second result reaching a later backward call followed by another
optimizer's step. The roles must be visible in the file: the discriminator step's optimizer is
built from the callable's parameters and not the producer's, the generator step's optimizer from
the producer's and not the callable's (a parameter list named first, `params =
itertools.chain(G.parameters(), E.parameters())`, counts as written inline). Data is never a
fake: a batch from a sampler or a loader, `torch.randn(...)`, `x.to(device)`, a helper of another
module. When an optimizer's parameters cannot be seen (`opt_g, opt_d = self.optimizers()`), the
rule stays silent. A use whose result is detached (`D(fake).detach()`, `G(z).detach()`) reaches
no backward.

The discriminator steps may run in a loop of their own (`for _ in range(n_critic):`) on a fake
built before it, with the generator step after that loop (GF102 leaves that loop to this rule:
recomputing the fake in it would not help the generator step). Also the reverse order: the
generator step backpropagates through the fake first and steps, then the discriminator step
applies its module to the same `fake` undetached (common when the generator is updated several
times per discriminator step); every read of `fake` in the discriminator step is detached, since
its optimizer does not train the producer. The same holds for any two steps where the first
step's optimizer trains the module that made a shared tensor (a shared encoder trained with the
critic, reused by the actor step). And the reverse order with a reused output: `out = D(fake)`
computed before the generator step, backpropagated by it, then read again by the discriminator
step: that step gets `D(fake.detach())` of its own (also when the output is kept on a field that
only this method writes, `self.p_fake = self.D(self.fake)`).

The steps may be written in helper functions or methods of the same file
(`train_discriminator(real, fake)`, `self.backward_D()` reading `self.fake_B`): a helper's
backward is matched to the caller through its parameters and `self` attributes, and the fake is
the caller's value made by a module (or a `self` attribute every method assigns from a module
call; a constant stored there, `self.fake = None` in `__init__`, is a placeholder). A local name
bound to a network field only `__init__` sets (`netG, netD = self.netG, self.netD`) is that network.
Networks and optimizers may sit in dict slots with constant keys (`self.nets["D"]`, `opts["G"]`,
`netD = self.nets["D"]`), the optimizers built per slot (`{k: Adam(n.parameters()) for k, n in
self.nets.items()}`), when nothing but `__init__` fills those slots. This holds in either order (the generator step's helper first, then the discriminator
step's), and one helper deeper (`self.backward_D_A()` calling `self.backward_D_basic(self.netD_A,
real, fake)`); a fake handed through a method that cannot be seen (an image-history pool of
another file) is still taken to carry what it was given. A fake the discriminator step's method
makes and returns (`fake, loss_d = self.d_step(real)`) is the caller's `fake`, made by the module
that method applied. So is one it keeps on its object (`self.fake = self.G(z)` in
`d_step()`, read again by `g_step()`).

## Why is this bad?
The discriminator's backward walks on into the generator's graph and frees it, so the generator
step raises "Trying to backward through the graph a second time". With the usual band-aid,
`d_loss.backward(retain_graph=True)`, it runs, but the generator also receives the gradients of
the discriminator loss (which pushes the generator the wrong way) unless its gradients are zeroed
in between, and the whole generator graph is kept alive for nothing.

## Example
```python
fake = G(z)
d_loss = bce(D(real), ones) + bce(D(fake), zeros)
opt_d.zero_grad(); d_loss.backward(); opt_d.step()
g_loss = bce(D(fake), ones)
opt_g.zero_grad(); g_loss.backward(); opt_g.step()
```

## Use instead
```python
d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)
```
Only the discriminator's use of `fake` is detached; the generator step keeps `D(fake)`. A
`retain_graph=True` on the discriminator's backward is removed with it when nothing later
backpropagates through that loss.

No fix is offered where the discriminator loss also reads the fake through another term (a
gradient penalty on an interpolate of real and fake, `gradient_penalty(D, real, fake)`): detaching
only the discriminator's applications would leave that term walking the generator's graph, and
whether the penalty can take a detached fake (its interpolate must then be made to require grad)
is the author's decision.

## Fix safety
Safe when the discriminator's backward had no `retain_graph`: the program raised before; now the
discriminator gradients are those of the same loss and the generator's come from its own loss
only (the canonical DCGAN step). Unsafe when it had `retain_graph=True`: the discriminator's
gradients are unchanged, but the generator no longer accumulates the discriminator loss's
gradients, so its gradients and parameters change (to the canonical ones) when they were not
zeroed in between. Unsafe when the `.detach()` goes into a helper: every other caller of the
helper gets it too (its discriminator gradients are unchanged; a generator that was not zeroed
after it no longer receives the discriminator loss's gradients). For a reused output, `out` in the
discriminator step becomes `D(fake.detach())`: the same value (the discriminator has not stepped
since `out` was computed), evaluated again, so a discriminator with dropout draws a new mask and
one with batch norm updates its running statistics once more; safe or unsafe as above, by the
generator step's `retain_graph`.
"""

from __future__ import annotations

import ast
from typing import Iterator

from fixer.analysis.calls import BackwardCall
from fixer.analysis.discriminator_uses import backpropagated_again, reaches_besides
from fixer.analysis.gan_steps import Use, use_key
from fixer.analysis.scopes import Scope
from fixer.analysis.undetached_fakes import ALREADY_USED, IN_HELPER, IN_HELPER_AFTER, NEEDS_AGAIN, undetached_fakes
from fixer.context import FileContext
from fixer.edits.keywords import remove_keyword
from fixer.rule import Applicability, Diagnostic, Edit, Rule

MESSAGE = (
    "The discriminator loss backpropagates through `{text}` into the generator's graph, which the "
    "generator step {when}; use `{text}.detach()` in the discriminator step"
)


class FakeNotDetachedForDiscriminator(Rule):
    code = "GF103"
    name = "fake-not-detached-for-discriminator"
    summary = "The discriminator loss backpropagates into the generator's graph that the generator step needs"
    fix_safety = "mixed"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for found in undetached_fakes(ctx):
            if found.how in (IN_HELPER, IN_HELPER_AFTER):
                yield self._report_in_helper(ctx, found.use, ALREADY_USED if found.how == IN_HELPER_AFTER else NEEDS_AGAIN)
            elif found.how in (NEEDS_AGAIN, ALREADY_USED):
                yield self._report(ctx, found.scope, found.reads, found.call, found.calls, found.how)
            else:
                yield self._report_reused(ctx, found.scope, found.use, found.reads, found.call, found.calls)

    def _report_in_helper(self, ctx: FileContext, use: Use, when: str) -> Diagnostic:
        text = ctx.text(use.arg)
        start, end = ctx.span(use.arg)
        return self.diagnostic(
            ctx,
            use.arg,
            MESSAGE.format(text=text, when=when).replace("discriminator loss", "discriminator step", 1),
            [Edit(start, end, f"{text}.detach()")],
            Applicability.UNSAFE,
            title=f"Detach `{text}` for the discriminator",
        )

    def _report(
        self, ctx: FileContext, scope: Scope, args: list[ast.expr], call: BackwardCall, calls: list[BackwardCall], when: str
    ) -> Diagnostic:
        text = ctx.text(args[0])
        if reaches_besides(ctx, scope, call, args[0], args):  # a penalty on it too: detaching these would not do
            message = MESSAGE.format(text=text, when=when) + " and wherever else its loss reads it (a gradient penalty's interpolate)"
            return self.diagnostic(ctx, args[0], message)
        edits = [Edit(*ctx.span(arg), f"{ctx.text(arg)}.detach()") for arg in args]
        band_aid = call.flag("retain_graph") is True
        if band_aid and not backpropagated_again(ctx, scope, call, calls):
            edits.append(remove_keyword(ctx, call.node, "retain_graph"))
        return self.diagnostic(
            ctx,
            args[0],
            MESSAGE.format(text=text, when=when),
            edits,
            Applicability.UNSAFE if band_aid else Applicability.SAFE,
            title=f"Detach `{text}` for the discriminator",
        )

    def _report_reused(
        self, ctx: FileContext, scope: Scope, use: Use, reads: list[ast.expr], first: BackwardCall, calls: list[BackwardCall]
    ) -> Diagnostic:
        """The discriminator step reads ``out = D(fake)`` that the generator step backpropagated
        (and whose generator it stepped): it gets ``D(fake.detach())`` of its own."""
        call_start, call_end = ctx.span(use.call)
        arg_start, arg_end = ctx.span(use.arg)
        fresh = ctx.source[call_start:arg_start] + f"{ctx.text(use.arg)}.detach()" + ctx.source[arg_end:call_end]
        name = ctx.text(reads[0])
        key = use_key(use.arg)
        edits = [Edit(*ctx.span(read), f"{ctx.text(read)}.detach()" if use_key(read) == key else fresh) for read in reads]
        band_aid = first.flag("retain_graph") is True
        if band_aid and not backpropagated_again(ctx, scope, first, calls):
            edits.append(remove_keyword(ctx, first.node, "retain_graph"))
        return self.diagnostic(
            ctx,
            reads[0],
            f"The discriminator loss backpropagates through `{name}` = `{ctx.text(use.call)}` into the generator's "
            f"graph, which the generator step {ALREADY_USED}; use `{fresh}` in the "
            "discriminator step",
            edits,
            Applicability.UNSAFE if band_aid else Applicability.SAFE,
            title=f"Use `{fresh}` in the discriminator step",
        )
