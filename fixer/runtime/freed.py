"""Diagnosis of "Trying to backward through the graph a second time": which value crossed into
a graph that had been freed, which backward freed it, and the cause in the rules' terms.

The freeing backward is found first: the latest earlier freeing backward whose graph (still
reachable from its loss) shares a freed node with the failing one; when that loss is gone, the
first backward after the freed node was built. On the failing graph's path from the root to the
freed node, the first node built before the freeing backward is the value that crossed; the
node above it is its first use after the free. Then:

- the same backward line ran again (a loop) and the loss itself was built before: GF102;
- the loss itself was backpropagated before: GF106 (repeated backward);
- the loss was built before the freeing backward: two losses of one graph, GF105;
- the crossed value's parameters belong to an optimizer other than the ones stepped between the
  two backwards: a GAN's fake fed to the discriminator undetached, GF103;
- the crossed value comes from an earlier iteration: held on an ``nn.Module``, GF104; built at a
  line that ran again since (carried state), GF101; built once before the loop, GF102.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import islice
from types import CodeType
from typing import Any, Optional

from fixer.runtime import graphwalk
from fixer.runtime.fill_site import fill_line, handed_fill, loop_line
from fixer.runtime.holders import Holder, holders, optimizers
from fixer.runtime.recorder import Call, NodeRecord, Recorder
from fixer.runtime.report import Finding, Piece, nth
from fixer.runtime.sites import divergence

RECENT = 16  # earlier backward calls whose graphs are compared with the failing one
BUILT_ON = 256  # nodes of a held value's graph searched for the crossed value


@dataclass
class Cause:
    code: str
    where: Piece
    message: str
    evidence: list


def diagnose(recorder: Recorder, failing: Call, error: str) -> Optional[Finding]:
    located = locate(recorder, failing, graphwalk.is_freed)
    if located is None:
        return None
    path, freeing = located
    cause = classify(recorder, failing, path, freeing, "freed by")
    return Finding.at(cause.code, cause.message, cause.where, error, cause.evidence) if cause else None


def roots_of(call: Call) -> list:
    """The graphs the call walked, where still reachable: the nodes kept for recent freeing
    calls, else the losses' ``grad_fn`` (unless changed in place since, ``total += loss``)."""
    if call.root_nodes:
        return list(call.root_nodes)
    records = set(map(id, call.root_records))
    return [t.grad_fn for t in (ref() for ref in call.roots) if t is not None and id(graphwalk.record(t.grad_fn)) in records]


def locate(recorder: Recorder, failing: Call, broken, freeing_calls: bool = True) -> Optional[tuple[list, Call]]:
    """(path from the failing root to the nearest ``broken`` node an earlier backward walked,
    that backward)."""
    roots = roots_of(failing)
    earlier = [c for c in recorder.calls if c is not failing and c.kind != "step" and c.frees == freeing_calls and c.position <= failing.position]
    for call in reversed(earlier[-RECENT:]):
        walked = {id(n) for n, _ in graphwalk.walk(roots_of(call))}
        if walked:
            path = graphwalk.path_to(roots, lambda node, _: id(node) in walked and broken(node))
            if path:
                return path, call
    # the earlier losses are gone: what the failing backward did not build itself was built before
    latest = earlier[-1] if earlier else None
    if latest is None:
        return None
    path = graphwalk.path_to(roots, lambda node, rec: rec is not None and rec.position < latest.position and broken(node))
    if not path:
        return None
    built = graphwalk.effective_record(path, len(path) - 1)
    call = next((c for c in earlier if c.position > built.position), latest)
    return path, call


def classify(recorder: Recorder, failing: Call, path: list, freeing: Call, role: str) -> Optional[Cause]:
    it = lambda position: recorder.iteration_of(position) + 1  # noqa: E731 (1-based for people)
    failed = Piece.at("failed", failing.stack, failing.iteration + 1)
    freed_by = Piece.at(role, freeing.stack, freeing.iteration + 1)
    index = next((i for i in range(len(path)) if _position(path, i) < freeing.position), len(path) - 1)
    crossed_record = graphwalk.effective_record(path, index)
    if crossed_record is None or failed is None or freed_by is None:
        return None
    same_site = freeing.stack == failing.stack
    level = divergence(crossed_record.stack, failing.stack)[0]
    built = Piece.at("built", crossed_record.stack, it(crossed_record.position), level)
    if index == 0:
        if set(map(id, failing.root_records)) & set(map(id, freeing.root_records)):
            if not same_site:
                return _repeated(recorder, failing, freeing, freed_by, failed)
            message = (
                f"the loss is built once, here, before the loop, and backpropagated again in the {nth(failed.iteration)} iteration "
                f"after the backward at line {freed_by.line} freed its graph: compute it inside the loop"
            )
            return Cause("GF102", built, message, [built, freed_by, failed])
        where = _first_backward(freeing, failing)
        shared_record = graphwalk.effective_record(path, len(path) - 1)
        shared = Piece.at("shared part built", shared_record.stack, it(shared_record.position), divergence(shared_record.stack, failing.stack)[0])
        message = (
            f"this backward frees the graph shared with the loss backpropagated at line {failed.line} "
            f"(shared part built at line {shared.line}): backpropagate their sum once"
        )
        return Cause("GF105", where, message, [shared, where, failed])
    use_record = graphwalk.effective_record(path, index - 1)
    used = Piece.at("used again", use_record.stack, it(use_record.position), divergence(use_record.stack, failing.stack)[0])
    evidence = [built, freed_by, used, failed]
    crossed = path[index]
    player = _two_players(recorder, crossed, crossed_record, freeing, failing)
    if player is not None:
        first_use = (_first_use(freeing, crossed, crossed_record) if player == "freeing" else None) or use_record
        use = Piece.at("fed to discriminator", first_use.stack, it(first_use.position), _entry_frame(first_use.stack, crossed_record.stack, freeing.stack))
        output = "the generator's output" if player != "reused" else "the discriminator's output on the undetached fake"
        message = (
            f"{output} (line {built.line}) enters this loss without .detach(): the backward at "
            f"line {freed_by.line} freed the generator's graph, which the backward at line {failed.line} needs"
        )
        return Cause("GF103", use, message, [built, use, freed_by, used, failed])
    if not same_site and it(crossed_record.position) == failing.iteration + 1:
        where = _first_backward(freeing, failing)
        message = f"this backward frees the graph that the backward at line {failed.line} needs again (through line {used.line}): backpropagate both losses once, summed"
        return Cause("GF105", where, message, [built, where, used, failed])
    names = (_holders(lambda t: t.grad_fn is crossed) or _holders_of_site(crossed_record) or _holders_of_site(use_record)
             or _holders(lambda t: _built_on(t.grad_fn, crossed)))  # ``self.M = self.M + delta``: the sum holds it
    on_module = [h for h in names if h.on_module]
    ranked = on_module + [h for h in names if not h.on_module]
    # the first holder whose filling line is found: a loop variable (``for old in memory``) names
    # the value, the list it runs over holds it across iterations
    holder, stored = next(((h, s) for h in ranked if (s := _fill(h, crossed_record, level))), (ranked[0] if ranked else None, None))
    held = f"`{holder.name}`" if holder else "a value"
    if stored is not None:
        evidence.insert(1, stored[0])
    if on_module and (stored is None or stored[2]):
        message = (
            f"{held} keeps a graph across forward calls: the backward at line {freed_by.line} freed it, "
            f"the forward at line {used.line} uses it again in the {nth(used.iteration)} iteration"
        )
        return Cause("GF104", stored[0] if stored else built, message, evidence)
    if recorder.last_seen.get(id(crossed_record.stack), -1) > crossed_record.position or use_record.stack == crossed_record.stack:
        message = (
            f"{held} built in the {nth(built.iteration)} iteration (line {built.line}) is carried into the {nth(used.iteration)} iteration "
            f"(line {used.line}) after the backward at line {freed_by.line} freed its graph: detach it where it crosses"
        )
        # a container or attribute is fixed where it is filled; a plain variable where it is used
        where = stored[0] if stored and ("." in holder.name or "[" in holder.name) else used
        return Cause("GF101", where, message, evidence)
    message = (
        f"{held} is built once, before the loop, and backpropagated again in the {nth(failed.iteration)} iteration after "
        f"the backward at line {freed_by.line} freed its graph: recompute it inside the loop"
    )
    # kept on an object (``self.weights`` set in ``__init__``): the line that fills it, which the fix moves
    where = stored[0] if stored and "." in holder.name else built
    return Cause("GF102", where, message, evidence)


def _repeated(recorder: Recorder, failing: Call, freeing: Call, freed_by: Piece, failed: Piece) -> Cause:
    """GF106 at the call to change: the later one when it is a leftover (a step ran between, or
    the first ran in a loop over micro-batches), else the first (retain_graph=True there)."""
    between = [c for c in recorder.calls if freeing.position <= c.position <= failing.position and c.kind == "step" and c is not failing]
    looped = any(c is not freeing and c.stack == freeing.stack for c in recorder.calls[-RECENT:])
    if between or looped:
        message = f"the loss backpropagated at line {freed_by.line} is backpropagated again here, after its graph was freed"
        return Cause("GF106", failed, message, [freed_by, failed])
    first = _first_backward(freeing, failing)
    message = f"this backward frees the graph that the backward at line {failed.line} walks again (the same loss)"
    return Cause("GF106", first, message, [first, failed])


def _position(path: list, index: int) -> int:
    found = graphwalk.effective_record(path, index)
    return found.position if found else -1


def _outside_forward(stack) -> int:
    """The innermost frame that is not a module's ``forward``: the training step's own line."""
    return next((i for i, (code, _) in enumerate(stack) if code.co_name != "forward"), 0)


def _entry_frame(use_stack, built_stack, freeing_stack) -> int:
    """Where the value entered the other network, as the code shows it: past modules' ``forward``
    and plain functions it was handed to that return a loss (``critic_loss(D, real, fake)``), up to
    the frame that also built it. A method (``backward_D`` reading ``self.fake``) or a step
    function that runs the backward itself is where it is read."""
    index, outer = _outside_forward(use_stack), divergence(use_stack, built_stack)[0]
    stepping = {code for code, _ in freeing_stack}
    while index < outer and use_stack[index][0].co_varnames[:1] != ("self",) and use_stack[index][0] not in stepping:
        index += 1
    return index


def _first_backward(freeing: Call, failing: Call) -> Piece:
    """The first of two backward calls, seen where both are (a helper's call, not its inside);
    the same line run twice in one loop is shown at the loop, which the fix rewrites (the
    innermost frame in a loop: ``for loss in losses: self.backprop(loss)`` runs one helper line
    twice)."""
    index = divergence(failing.stack, freeing.stack)[1]
    piece = Piece.at("first backward", freeing.stack, freeing.iteration + 1, index)
    if freeing.stack == failing.stack:
        for code, line in freeing.stack:
            loop = loop_line(code, line)
            if loop is not None:
                return Piece("first backward", code.co_filename, loop, freeing.iteration + 1, _text(code.co_filename, loop))
    return piece


def _two_players(recorder: Recorder, crossed: Any, crossed_record: NodeRecord, freeing: Call, failing: Call) -> Optional[str]:
    """Two optimizers take turns (a GAN, an actor and a critic): one stepped between the two
    backwards, and the crossed value's parameters and the failing loss's own ones belong to
    different optimizers. Returns which backward's loss should have seen the value detached:
    "failing" when the optimizer stepped between owns the value's parameters, else "freeing"."""
    stepped = [o for o in (c.optimizer() for c in recorder.calls if c.kind == "step" and freeing.position <= c.position <= failing.position) if o is not None]
    if not stepped:
        return None
    owned = lambda opt: {id(p) for g in opt.param_groups for p in g["params"]}  # noqa: E731
    value = {id(t) for t in graphwalk.leaves(crossed)}
    loss = {id(t) for root in roots_of(failing) for t in graphwalk.leaves(root)} - value
    every = optimizers()
    value_owners = [o for o in every if owned(o) & value]
    loss_owners = [o for o in every if owned(o) & loss]
    if not value_owners:
        return None
    if not any(all(o is not v for v in value_owners) for o in loss_owners):
        # the value itself joins both players (``D(G(z))`` kept and reused by the other's loss):
        # one of its optimizers stepped between the backwards, another did not
        idle = [v for v in value_owners if all(v is not o for o in stepped)]
        return "reused" if idle and len(idle) < len(value_owners) else None
    if recorder.iteration_of(crossed_record.position) != failing.iteration:  # an old value: is it stale?
        since = [c.optimizer() for c in recorder.calls if c.kind == "step" and crossed_record.position <= c.position <= failing.position]
        if any(o is v for o in since for v in value_owners):
            return None  # its own parameters moved since it was built: built once, before the loop (GF102)
    return "failing" if any(any(o is v for v in value_owners) for o in stepped) else "freeing"


def _first_use(freeing: Call, crossed: Any, crossed_record: NodeRecord) -> Optional[NodeRecord]:
    """Where the crossed value entered the other network in the freeing backward's graph: the
    earliest node above it that uses a parameter its own graph does not (``D(cat([a, fake]))``
    enters at ``D``, not at ``cat``); else the earliest node that consumed it."""
    own = {id(t) for t in graphwalk.leaves(crossed)}
    above = graphwalk.ancestors(roots_of(freeing), crossed)
    entering = [n for n in above if any(hasattr(c, "variable") and id(c.variable) not in own for c, _ in n.next_functions)]
    consuming = [n for n in above if any(c is crossed for c, _ in n.next_functions)]
    inherited = graphwalk.inherited_records(roots_of(freeing))
    for nodes in (entering, consuming):
        records = [r for r in (inherited.get(id(n)) for n in nodes) if r is not None and crossed_record.position <= r.position < freeing.position]
        if records:
            return min(records, key=lambda r: r.position)
    return None


def _holders(wanted) -> list[Holder]:
    return holders(wanted)


def _built_on(node: Any, crossed: Any) -> bool:
    """The node's graph reaches ``crossed`` within its nearest BUILT_ON nodes."""
    return node is not None and any(n is crossed for n, _ in islice(graphwalk.walk([node]), BUILT_ON))


def stored_at(record: NodeRecord, level: int) -> tuple[Optional[Holder], Optional[Piece]]:
    """The first holder of the tensors built at the record's site whose filling line is found,
    and that line (``self.cache = features(x)``); else the first holder, or none."""
    names = _holders_of_site(record)
    found = next(((h, s) for h in names if (s := _fill(h, record, level))), None)
    return (found[0], found[1][0]) if found else (names[0] if names else None, None)


def _holders_of_site(site: NodeRecord) -> list[Holder]:
    """Who holds the tensors built at a site: where the crossed value was built (its newer
    copies), else where it was used (``self.prev = 0.5 * (out + self.prev)``)."""
    return holders(lambda t: t.grad_fn is not None and getattr(graphwalk.record(t.grad_fn), "stack", None) == site.stack)


def _fill(holder: Holder, crossed: NodeRecord, level: int) -> Optional[tuple[Piece, Optional[CodeType], bool]]:
    """(where the holder is filled, that function's code when it ran, whether it is a method): in
    the frame the holder's name comes from, else in the frames that built the value, innermost
    first (a list the loop hands to a step function that appends to it under the same name),
    else in a function of the file they hand the value to."""
    frames = [crossed.stack[i] for i in range(min(level + 1, len(crossed.stack)))]
    for code, line in frames:  # the statement that built it stored it (hidden = rnn(x, hidden)): it carries the graph
        if _same_variable(holder, code) and fill_line(holder.name, code, line) == line:
            return Piece(f"stored in {holder.name}", code.co_filename, line, None, _text(code.co_filename, line)), code, _method(code)
    if holder.code is not None:  # the holder's own frame, wherever it is in the stack: its line received the value
        own = [(holder.code, line) for code, line in crossed.stack if code is holder.code]
        frames = (own[:1] or [(holder.code, 0)]) + frames
    for code, line in frames:
        stored = fill_line(holder.name, code, line)
        if stored is not None:
            return Piece(f"stored in {holder.name}", code.co_filename, stored, None, _text(code.co_filename, stored)), code, _method(code)
    for code, line in frames:  # handed to a function of the file that stores it (``self._advance(hc)``)
        handed = handed_fill(holder.name, code, line)
        if handed is not None:
            return Piece(f"stored in {holder.name}", code.co_filename, handed[0], None, _text(code.co_filename, handed[0])), None, handed[1]
    return None


def _method(code: CodeType) -> bool:
    return code.co_varnames[:1] == ("self",)


def _same_variable(holder: Holder, code: CodeType) -> bool:
    """Whether a name stored in ``code`` is the holder's variable: its own frame's, or a global
    that the function assigns (``global hidden``), never a local of the same name elsewhere."""
    root = re.match(r"\w*", holder.name).group(0)
    if holder.code is None or code is holder.code:
        return holder.code is not None
    return root in code.co_names and root not in code.co_varnames and holder.code.co_name == "<module>"


def _text(filename: str, line: int) -> str:
    import linecache

    return linecache.getline(filename, line).strip()
