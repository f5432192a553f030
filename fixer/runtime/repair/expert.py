"""The candidate repairs of one finding, in the order an expert tries them: the one that keeps
the most gradient first (detach the old iterations, not this one's value; recompute before
detaching, except for a value built before the loop: its cut first, which the probe refuses where
the gradient through it is the only one its parameters get), a number (``.item()``) before a detached tensor where only a leak is reported;
``torch.no_grad()`` where a value is built once, outside every loop, before anything else (the
targets or data that a fixed network labels: their graph reaches no stepped parameter, which
the cut's probe measures). Each is built at a place the finding's evidence names, in whichever
file that is."""

from __future__ import annotations

from itertools import chain
from typing import Iterator

from fixer.runtime.report import Finding, Piece
from fixer.runtime.repair.builds import no_grad_at_build, outside_loops
from fixer.runtime.repair.calls import create_graph, drop_retain
from fixer.runtime.repair.candidate import Candidate, context, pieces, statement_at
from fixer.runtime.repair.losses import fresh_value, sum_losses
from fixer.runtime.repair.protocol import drop_premature_step, move_zero_grad, zero_after_step
from fixer.runtime.repair.stores import store_repairs
from fixer.runtime.repair.uses import detach_inputs, handed_on, recompute_before_use


def candidates(finding: Finding) -> list[Candidate]:
    found, seen = [], set()
    for option in _ranked(finding):
        key = tuple((p.filename, p.fixed) for p in option.proposals)
        if key not in seen:
            seen.add(key)
            found.append(option)
    return found


def _ranked(finding: Finding) -> Iterator[Candidate]:
    code = finding.code
    stored = pieces(finding, "stored in ")
    used = pieces(finding, "used again")
    failed = next(iter(pieces(finding, "failed", "needed by")), None)
    built = pieces(finding, "built")
    once = [b for b in built if _once(b)]  # built outside every loop: data, when no stepped parameter is behind it
    if code in _BUILT:
        yield from chain.from_iterable(no_grad_at_build(finding, b) for b in once)
    if code == "GF302":
        yield from chain.from_iterable(drop_retain(finding, p) for p in pieces(finding, "retained by"))
    if code == "GF107":
        yield from chain.from_iterable(create_graph(finding, p) for p in pieces(finding, "gradient taken"))
    if code == "GF103":
        yield from chain.from_iterable(detach_inputs(finding, p) for p in pieces(finding, "fed to discriminator"))
        yield from chain.from_iterable(recompute_before_use(finding, b, u, failed) for b in built for u in used if _after_step(finding, u))
    if code in ("GF105", "GF106"):
        yield from drop_premature_step(finding)
        freeing = pieces(finding, "first backward", "freed by")
        yield from chain.from_iterable(fresh_value(finding, b, f, u) for b in pieces(finding, "built") for f in freeing for u in used)
        yield from chain.from_iterable(sum_losses(finding, f) for f in freeing)
    if code == "GF102":  # built before the loop: the cut first, refused where the gradient must flow (cuts.reused_from_before)
        yield from chain.from_iterable(store_repairs(finding, p, ("crossing", "detach")) for p in stored)
    if code in ("GF102", "GF104"):
        yield from chain.from_iterable(recompute_before_use(finding, s, u, failed) for s in stored for u in used)
    if code in ("GF101", "GF102", "GF104"):
        yield from chain.from_iterable(store_repairs(finding, p, ("crossing", "detach", "uncache")) for p in stored)
    if code == "GF201":
        yield from move_zero_grad(finding)
    if code == "GF203":
        yield from zero_after_step(finding)
    if code == "GF301":
        yield from chain.from_iterable(store_repairs(finding, p, ("item", "detach")) for p in stored)
        yield from chain.from_iterable(handed_on(finding, p, m) for m in ("item", "detach") for p in stored)
    if code in _BUILT:
        yield from chain.from_iterable(no_grad_at_build(finding, b) for b in built if b not in once)


_BUILT = ("GF101", "GF102", "GF104", "GF105", "GF106")


def _once(piece: Piece) -> bool:
    ctx = context(piece.filename)
    stmt = statement_at(ctx, piece.line) if ctx is not None else None
    return stmt is not None and outside_loops(ctx, stmt)


def _after_step(finding: Finding, used: Piece) -> bool:
    """The use comes after the optimizer step that changed the parameter (in the same file):
    recomputing it there sees the stepped parameter."""
    return any(p.filename == used.filename and p.line < used.line for p in pieces(finding, "changed by"))
