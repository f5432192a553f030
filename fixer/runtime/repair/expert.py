"""The candidate repairs of one finding, in the order an expert tries them: the one that keeps
the most gradient first (detach the old iterations, not this one's value; recompute before
detaching), a number (``.item()``) before a detached tensor where only a leak is reported. Each
is built at a place the finding's evidence names, in whichever file that is."""

from __future__ import annotations

from itertools import chain
from typing import Iterator

from fixer.runtime.report import Finding
from fixer.runtime.repair.calls import create_graph, drop_retain
from fixer.runtime.repair.candidate import Candidate, pieces
from fixer.runtime.repair.losses import fresh_value, sum_losses
from fixer.runtime.repair.stores import store_repairs
from fixer.runtime.repair.uses import detach_inputs, recompute_before_use


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
    if code == "GF302":
        yield from chain.from_iterable(drop_retain(finding, p) for p in pieces(finding, "retained by"))
    if code == "GF107":
        yield from chain.from_iterable(create_graph(finding, p) for p in pieces(finding, "gradient taken"))
    if code == "GF103":
        yield from chain.from_iterable(detach_inputs(finding, p) for p in pieces(finding, "fed to discriminator"))
    if code in ("GF105", "GF106"):
        freeing = pieces(finding, "first backward", "freed by")
        yield from chain.from_iterable(fresh_value(finding, b, f, u) for b in pieces(finding, "built") for f in freeing for u in used)
        yield from chain.from_iterable(sum_losses(finding, f) for f in freeing)
    if code in ("GF102", "GF104"):
        yield from chain.from_iterable(recompute_before_use(finding, s, u, failed) for s in stored for u in used)
    if code in ("GF101", "GF102", "GF104"):
        yield from chain.from_iterable(store_repairs(finding, p, ("crossing", "detach", "uncache")) for p in stored)
    if code == "GF301":
        yield from chain.from_iterable(store_repairs(finding, p, ("item", "detach")) for p in stored)
