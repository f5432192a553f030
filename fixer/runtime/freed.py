"""Diagnosis of "Trying to backward through the graph a second time": which value crossed into
a graph that had been freed, which backward freed it, and the cause in the rules' terms.

From the failing backward's roots, the nearest node whose saved tensors are gone is found; the
backward that freed it is the first earlier freeing backward whose graph reaches it (or, if that
graph is gone, the first built after it). On the path from the root, the first node built before
that backward is the value that crossed (``crossed``); the node above it, the first use after
the free. Then:

- the failing root itself was backpropagated before: GF106 (repeated backward);
- the root was built before the freeing backward: two losses of one graph, GF105;
- the crossed value's parameters belong to an optimizer other than the one stepped between the
  two backwards: a GAN's fake fed to the discriminator undetached, GF103;
- the crossed value comes from an earlier iteration: held on an ``nn.Module``, GF104; built at a
  line that ran again since (carried state), GF101; built once before the loop, GF102.
"""

from __future__ import annotations

from typing import Any, Optional

from fixer.runtime import graphwalk
from fixer.runtime.holders import holders, optimizers
from fixer.runtime.recorder import Call, Recorder
from fixer.runtime.report import Finding, Piece
from fixer.runtime.fill_site import fill_line
from fixer.runtime.sites import divergence, source_line


def diagnose(recorder: Recorder, failing: Call, error: str) -> Optional[Finding]:
    roots = [t.grad_fn for t in _alive(failing.roots) if t.grad_fn is not None]
    # the failing backward frees what it ran before it failed: only a node built before an
    # earlier freeing backward can have been freed by one
    earlier = max((c.position for c in recorder.calls if c.frees and c is not failing and c.kind != "step"), default=-1)
    path = graphwalk.path_to(roots, lambda node, rec: rec is not None and rec.position < earlier and graphwalk.is_freed(node))
    if not path:
        return None
    freed_record = graphwalk.effective_record(path, len(path) - 1)
    freeing = _freeing_backward(recorder, failing, path[-1], freed_record.position if freed_record else -1)
    iteration = lambda position: recorder.iteration_of(position) + 1  # noqa: E731 (1-based for people)
    failed = Piece.at("failed", failing.stack, failing.iteration + 1)
    freed_by = Piece.at("freed by", freeing.stack, freeing.iteration + 1) if freeing else None
    if freeing is None:
        return None
    if _same_root(failing, freeing):
        message = "the loss is backpropagated again here: the backward at line {} already freed its graph".format(freed_by.line)
        return Finding.at("GF106", message, failed, error, [freed_by, failed])
    index = next((i for i, _ in enumerate(path) if _record_position(path, i) < freeing.position), len(path) - 1)
    crossed_record = graphwalk.effective_record(path, index)
    built = Piece.at("built", crossed_record.stack, iteration(crossed_record.position)) if crossed_record else None
    if index == 0:
        message = (
            f"this backward frees the graph shared with the loss backpropagated at line {failed.line} "
            f"(shared part built at line {built.line if built else '?'}): backpropagate their sum once"
        )
        return Finding.at("GF105", message, freed_by, error, [built, freed_by, failed])
    use_record = graphwalk.effective_record(path, index - 1)
    used = Piece.at("used again", use_record.stack, iteration(use_record.position))
    evidence = [built, freed_by, used, failed]
    crossed = path[index]
    if _fed_to_other_optimizer(recorder, crossed, freeing, failing):
        where = _first_use(freeing, crossed, crossed_record) or use_record
        level = divergence(crossed_record.stack, where.stack)
        use = Piece.at("fed to discriminator", where.stack, iteration(where.position), level)
        message = (
            f"the generator's output (line {built.line}) enters this loss without .detach(): its backward "
            f"(line {freed_by.line}) freed the generator's graph, which the backward at line {failed.line} needs"
        )
        return Finding.at("GF103", message, use, error, [built, use, freed_by, used, failed])
    if iteration(crossed_record.position) >= failing.iteration + 1 and crossed_record.position >= freeing.position:
        return None
    names = _holders_of_site(crossed_record) or _holders_of_site(use_record)
    on_module = [h.name for h in names if h.on_module]
    held = f"`{(on_module or [h.name for h in names] or ['a value'])[0]}`"
    if on_module:
        code, line = crossed_record.stack[0]
        stored = fill_line(on_module[0], code, line)
        where = Piece(f"stored on {on_module[0]}", built.filename, stored, built.iteration, source_line(code, stored)) if stored else built
        message = (
            f"{held} keeps a graph across forward calls: the backward at line {freed_by.line} freed it, "
            f"the forward at line {used.line} uses it again in iteration {used.iteration}"
        )
        return Finding.at("GF104", message, where, error, [built, where if stored else None, freed_by, used, failed])
    if recorder.last_seen.get(crossed_record.stack, -1) > crossed_record.position:
        message = (
            f"{held} built here in iteration {built.iteration} is carried into iteration {used.iteration} "
            f"(line {used.line}) after the backward at line {freed_by.line} freed its graph: detach it where it crosses"
        )
        return Finding.at("GF101", message, built, error, evidence)
    message = (
        f"{held} is built once, before the loop, and backpropagated again in iteration {failed.iteration} after "
        f"the backward at line {freed_by.line} freed its graph: recompute it inside the loop"
    )
    return Finding.at("GF102", message, built, error, evidence)


def _alive(refs: tuple) -> list:
    return [t for t in (ref() for ref in refs) if t is not None]


def _record_position(path: list, index: int) -> int:
    found = graphwalk.effective_record(path, index)
    return found.position if found else -1


def _freeing_backward(recorder: Recorder, failing: Call, freed: Any, built_at: int) -> Optional[Call]:
    """The first earlier freeing backward after the node was built whose graph reaches it; a
    backward whose roots are gone cannot be checked and is taken when no checked one matches."""
    unchecked = None
    for call in recorder.calls:
        if call is failing or call.kind == "step" or not call.frees or call.position <= built_at:
            continue
        roots = [t.grad_fn for t in _alive(call.roots) if t.grad_fn is not None]
        if roots and any(graphwalk.reaches(root, freed) for root in roots):
            return call
        if not roots and unchecked is None:
            unchecked = call
    return unchecked


def _same_root(failing: Call, freeing: Call) -> bool:
    before = {id(t) for t in _alive(freeing.roots)}
    return any(id(t) in before for t in _alive(failing.roots))


def _fed_to_other_optimizer(recorder: Recorder, crossed: Any, freeing: Call, failing: Call) -> bool:
    stepped = [c.optimizer() for c in recorder.calls if c.kind == "step" and freeing.position <= c.position <= failing.position]
    stepped = [o for o in stepped if o is not None]
    if not stepped:
        return False
    leaves = {id(t) for t in graphwalk.leaves(crossed)}
    owned = lambda opt: {id(p) for g in opt.param_groups for p in g["params"]}  # noqa: E731
    if any(leaves & owned(o) for o in stepped):
        return False
    return any(leaves & owned(o) for o in optimizers() if all(o is not s for s in stepped))


def _first_use(freeing: Call, crossed: Any, crossed_record: Any) -> Optional[Any]:
    """The record of the node that fed the crossed value into the freeing backward's graph."""
    roots = [t.grad_fn for t in _alive(freeing.roots) if t.grad_fn is not None]
    uses = [graphwalk.record(n) for n in graphwalk.consumers(roots, crossed)]
    uses = [r for r in uses if r is not None and crossed_record.position <= r.position < freeing.position]
    return min(uses, key=lambda r: r.position) if uses else None


def _holders_of_site(site: Any) -> list:
    """Who holds the tensors built at a site: where the crossed value was built (its newer
    copies), else where it was used (``self.prev = 0.5 * (out + self.prev)``)."""
    stack = site.stack
    return holders(lambda t: t.grad_fn is not None and getattr(graphwalk.record(t.grad_fn), "stack", None) == stack)
