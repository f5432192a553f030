"""The fakes a discriminator step backpropagates through into the generator's graph, as GF103
reports them, one finding per fake (``discriminator_uses.py`` answers each question; this module
runs them over a file in GF103's order and drops a read already found). ``undetached_fake_lines``
is the fact other rules defer to: the lines where GF103 names the cause (GF102, GF105 and GF108
stay silent there)."""

from __future__ import annotations

import ast
from typing import Iterator, NamedTuple, Optional, Sequence

from fixer.analysis.calls import BackwardCall
from fixer.analysis.discriminator_uses import (
    discriminator_steps_after_generator,
    discriminator_uses,
    helper_discriminator_uses,
    reused_discriminator_outputs,
)
from fixer.analysis.gan_events import may_step_in_helpers
from fixer.analysis.gan_steps import Use, discriminator_generator_pairs, gan_backwards
from fixer.analysis.scopes import Scope, scopes
from fixer.context import FileContext

IN_HELPER = "in helper"
IN_HELPER_AFTER = "in helper, after the generator step"
NEEDS_AGAIN = "needs again"
ALREADY_USED = "already backpropagated and stepped"
REUSED = "reused output"


class UndetachedFake(NamedTuple):
    """``how``: IN_HELPER (``use`` in a helper's discriminator step; IN_HELPER_AFTER when the
    generator step ran first and already freed the graph), NEEDS_AGAIN (``use``; the
    generator step after ``call`` needs the graph again), ALREADY_USED (``reads``; the generator
    step ``call`` already backpropagated it), REUSED (``use`` = ``out = D(fake)`` that ``call``
    backpropagated, read again at ``reads``). ``reads[0]`` is where GF103 reports."""

    how: str
    scope: Scope
    reads: list[ast.expr]
    use: Optional[Use] = None
    call: Optional[BackwardCall] = None
    calls: Sequence[BackwardCall] = ()
    step: Optional[ast.stmt] = None  # IN_HELPER*: the statement of ``scope`` that runs the helper's step


def undetached_fakes(ctx: FileContext) -> Iterator[UndetachedFake]:
    """GF103's findings in the file, in its order; a read belongs to the first finding that holds it."""
    reported: set[int] = set()
    helpers = may_step_in_helpers(ctx)
    for scope in scopes(ctx):
        for use, generator_first, step in helper_discriminator_uses(ctx, scope) if helpers else ():
            if id(use.arg) not in reported:
                reported.add(id(use.arg))
                yield UndetachedFake(IN_HELPER_AFTER if generator_first else IN_HELPER, scope, [use.arg], use, step=step)
        found = gan_backwards(ctx, scope)
        if found is None:
            continue
        calls, steps = found
        for first, second in discriminator_generator_pairs(ctx, scope, calls):
            for use in discriminator_uses(ctx, scope, first, second, steps):
                if id(use.arg) not in reported:
                    reported.add(id(use.arg))
                    yield UndetachedFake(NEEDS_AGAIN, scope, [use.arg], use, first, calls)
        for reads, second in discriminator_steps_after_generator(ctx, scope, calls, steps):
            if not any(id(r) in reported for r in reads):
                reported.update(id(r) for r in reads)
                yield UndetachedFake(ALREADY_USED, scope, reads, None, second, calls)
        for use, reads, first in reused_discriminator_outputs(ctx, scope, calls, steps):
            if not any(id(r) in reported for r in reads):
                reported.update(id(r) for r in reads)
                yield UndetachedFake(REUSED, scope, reads, use, first, calls)


def undetached_fake_lines(ctx: FileContext) -> set[int]:
    """The lines GF103 reports (its diagnostics start at ``reads[0]``), and those of the calls that
    run a helper's discriminator step it reports, computed once per file."""
    def compute() -> set[int]:
        found = list(undetached_fakes(ctx))
        return {f.reads[0].lineno for f in found} | {f.step.lineno for f in found if f.step is not None}

    return ctx.memo("gf103_lines", compute)
