"""``zero_grad()`` calls that wipe the gradients a step needs (GF201's query): in a straight-line
block, one after a backward and before the step of the same parameters (the backward may run in
a helper, or under a condition), unless GF202 reports that step (``early_steps``: the step's
position is the cause) or something between touches ``.grad``; and gradient accumulation whose
``zero_grad()`` runs every batch while the step runs only under ``if (i + 1) % k == 0:``. Also
where the iteration's forward pass starts in the block (``insertion_index``), where such a
``zero_grad()`` belongs."""

from __future__ import annotations

import ast
from typing import Iterator, NamedTuple, Optional

from fixer.analysis.early_steps import early_step_lines
from fixer.analysis.passes import guarded_statement, is_pass_filter, same_guard
from fixer.analysis.call_events import Event, block_events
from fixer.analysis.protocol import (
    blocks,
    call_loops,
    is_loop_body,
    is_plain_step,
    optimizer_params,
    optimizer_scopes,
    touches_grads,
    zeroes_for,
)
from fixer.analysis.statement_moves import is_docstring
from fixer.analysis.scopes import Scope
from fixer.context import FileContext
from fixer.nodes import walk


class WipingZeroGrad(NamedTuple):
    """``zero`` wipes the gradients ``step`` needs: after ``backward`` (``guard`` None), or every
    batch while ``step`` runs under the accumulation ``guard`` (``backward`` None). ``objects``:
    the optimizers and models whose gradients count."""

    block: list[ast.stmt]
    events: list[Event]
    zero: Event
    step: Event
    backward: Optional[Event]
    guard: Optional[ast.If]
    objects: set[str]
    refilled: Optional[Event] = None  # a backward between the zero_grad and the step: the step sees its gradients only


def wiping_zero_grads(ctx: FileContext) -> Iterator[WipingZeroGrad]:
    """GF201's findings in the file, in order (per block: the accumulation form first)."""
    for scope in optimizer_scopes(ctx):
        for block in blocks(scope):
            yield from _wiping_in(ctx, scope, block)


def _wiping_in(ctx: FileContext, scope: Scope, block: list[ast.stmt]) -> Iterator[WipingZeroGrad]:
    yield from _wiping_accumulation(ctx, block, block_events(ctx, scope, block), _runs_per_pass(ctx, scope, block))
    events = block_events(ctx, scope, block, through_calls=True)  # a helper's backward fills .grad too
    for zero in events:
        if zero.kind != "zero_grad" or not zero.direct or zero.call.args or _keyword_other_than_set_to_none(zero.call):
            continue
        step, refilled = _next_step(ctx, events, zero), None
        if step is None:
            step, refilled = _step_after_refill(ctx, events, zero)
        backward = _previous_backward(events, zero, step)
        if step is None or backward is None or not is_plain_step(step) or step.call.lineno in early_step_lines(ctx):
            continue  # step(closure) runs its own backward; GF202: the step comes before its own backward
        if refilled is not None and not _only_for_the_step(events, backward, step):
            continue
        objects = {step.owner, zero.owner} | set(optimizer_params(ctx).get(step.owner) or ())
        between = block[backward.index + 1 : step.index]
        if any(touches_grads(ctx, stmt, objects) for stmt in between if stmt is not block[zero.index]):
            continue  # gradients saved or rewritten around the zero_grad: maybe on purpose
        yield WipingZeroGrad(block, events, zero, step, backward, None, objects, refilled)


def _runs_per_pass(ctx: FileContext, scope: Scope, block: list[ast.stmt]) -> bool:
    """``block`` runs once per pass of a loop: a loop's body, or the whole body of a function that
    the project calls only inside loops (``train_step(...)`` in a batch loop)."""
    return is_loop_body(ctx, block) or block is getattr(scope.node, "body", None) and call_loops(ctx, scope) is not None


def _wiping_accumulation(ctx: FileContext, block: list[ast.stmt], events: list[Event], cyclic: bool) -> Iterator[WipingZeroGrad]:
    """``zero_grad(); loss.backward(); if (i + 1) % k == 0: step()`` run once per batch: the
    zero_grad of the next batch lands between this backward and the step that accumulates. In
    a loop's body what comes before the zero_grad also comes after it, in the next pass
    (``loss.backward(); if ...: step()`` then ``zero_grad()`` at the end of the body), and so it
    does in a function called once per pass."""
    for zero in events:
        if zero.kind != "zero_grad" or not zero.direct or zero.conditional or zero.call.args or _keyword_other_than_set_to_none(zero.call):
            continue
        later = [e for e in events if e.index > zero.index] + [e for e in events if cyclic and e.index < zero.index]
        if not any(e.kind == "step" and _guard_of(ctx, block, e) is not None for e in later):
            continue  # cheap structural gate before any ownership analysis; a shared guard runs on every selected pass
        if not any(e.kind == "backward" and not e.conditional and _fills_grads_now(e) for e in later):
            continue
        if any(e.kind == "backward" and any(k.arg == "retain_graph" for k in e.call.keywords) for e in later):
            continue  # truncated backpropagation through time: each backward spans the window on purpose
        steps = [e for e in events if e.kind == "step" and zeroes_for(ctx, zero.owner, e.owner) is not False]
        zeros = [e for e in events if e.kind == "zero_grad" and e is not zero and zeroes_for(ctx, e.owner, zero.owner) is not False]
        if len(steps) != 1 or zeros or steps[0].index == zero.index or zeroes_for(ctx, zero.owner, steps[0].owner) is not True:
            continue
        if steps[0].index < zero.index and not cyclic:
            continue
        step = steps[0]
        guard = _guard_of(ctx, block, step)
        if guard is None or not same_guard(ctx, block[zero.index], block[step.index]) or not is_plain_step(step):
            continue  # the fix moves the zero_grad under the step's guard: both under one test or none
        first = min((e.index for e in later if e.kind == "backward" and e.index < step.index), default=None)
        if first is None or any(e.kind == "backward" and e.index == step.index for e in events):
            continue  # the guard backpropagates before its step: the step uses that, not an accumulated sum
        objects = {step.owner, zero.owner} | set(optimizer_params(ctx).get(step.owner) or ())
        if any(touches_grads(ctx, stmt, objects) for stmt in block[first + 1 : step.index] if stmt is not block[zero.index]):
            continue
        yield WipingZeroGrad(block, events, zero, step, None, guard, objects)


def _binds(stmt: ast.stmt, name: str) -> bool:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
    return any(isinstance(node, ast.Name) and node.id == name for target in targets for node in walk(target))


def _fills_grads_now(backward: Event) -> bool:
    """A backward whose gradients land in ``.grad`` at once: not ``accelerator.backward`` (whose
    wrapped optimizer skips zero_grad while accumulating), but Lightning's ``manual_backward``."""
    func = backward.call.func
    return backward.spelling != "owner" or isinstance(func, ast.Attribute) and func.attr == "manual_backward"


def _guard_of(ctx: FileContext, block: list[ast.stmt], step: Event) -> Optional[ast.If]:
    """The accumulation guard around ``step``: ``if (i + 1) % k == 0: ... step()`` as the block's
    statement, or alone under a shared guard there (``if c: if (i + 1) % k == 0: ...``), with the
    step directly one of its body's statements; not itself a filter (a shared guard runs on every
    selected pass)."""
    guard = guarded_statement(ctx, block[step.index])
    if not isinstance(guard, ast.If) or guard.orelse or is_pass_filter(ctx, guard):
        return None
    if not any(isinstance(s, ast.Expr) and s.value is step.call for s in guard.body):
        return None
    return guard if _accumulation_guard(guard) else None


def _accumulation_guard(guard: ast.If) -> bool:
    """The test is a modulo compared with zero."""
    test = guard.test
    return (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.left, ast.BinOp)
        and isinstance(test.left.op, ast.Mod)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == 0
    )


def _keyword_other_than_set_to_none(call: ast.Call) -> bool:
    return any(k.arg != "set_to_none" for k in call.keywords)


def _next_step(ctx: FileContext, events: list[Event], zero: Event) -> Optional[Event]:
    """The first step after ``zero`` that uses the gradients it clears, with no backward between."""
    for event in events:
        if event.index <= zero.index:
            continue
        if event.kind == "backward":
            return None
        if event.kind == "step":
            if event.conditional or zeroes_for(ctx, zero.owner, event.owner) is not True:
                return None
            return event
    return None


def _only_for_the_step(events: list[Event], backward: Event, step: Event) -> bool:
    """The wiped backward is a statement of this block (not a helper that may use its gradients
    itself: a saliency, a gradient norm) and no step but ``step`` runs after it in the block (a
    generator's step after the discriminator's wanted its gradients; the zero_grad between cleared
    what it left in the discriminator)."""
    return backward.direct and backward.via is None and not any(
        e.kind == "step" and e is not step for e in events if e.index >= backward.index
    )


def _step_after_refill(ctx: FileContext, events: list[Event], zero: Event) -> tuple[Optional[Event], Optional[Event]]:
    """(the step, the backward before it) when ``zero`` is followed by unconditional backward
    calls and then the step of what it clears, with no other zero_grad or step between:
    ``a.backward(); opt.zero_grad(); b.backward(); opt.step()`` steps with b's gradients only."""
    refilled = None
    for event in events:
        if event.index <= zero.index:
            continue
        if event.kind == "backward":
            if event.conditional or not _fills_grads_now(event):
                return None, None
            refilled = refilled or event
        elif event.kind == "step" and refilled is not None and not event.conditional and zeroes_for(ctx, zero.owner, event.owner) is True:
            return event, refilled
        else:
            return None, None
    return None, None


def _previous_backward(events: list[Event], zero: Event, step: Optional[Event]) -> Optional[Event]:
    """The last backward before ``zero`` with no step of the same optimizer between. One that may
    not run counts too: the zero_grad after it wipes its gradients when it ran, and clears nothing
    the step could use when it did not."""
    if step is None:
        return None
    found = None
    for event in events:
        if event.index >= zero.index:
            break
        if event.kind == "backward" and _fills_grads_now(event):
            found = event
        elif event.kind == "step" and event.owner == step.owner:
            found = None
    return found


def insertion_index(
    ctx: FileContext, block: list[ast.stmt], events: list[Event], backward: Event, objects: set, owner: str
) -> Optional[int]:
    """Where the iteration's forward pass starts: walk up from the backward over statements without
    protocol events (and over earlier plain backward calls, whose gradients the step also uses);
    stop after a step or zero_grad. None when an earlier conditional backward makes it unclear."""
    index = backward.index
    while index > 0:
        above = [e for e in events if e.index == index - 1]
        if any(e.kind == "backward" and (e.conditional or not e.direct) for e in above):
            return None
        if any(e.kind != "backward" for e in above) or touches_grads(ctx, block[index - 1], objects):
            break
        if _binds(block[index - 1], owner.split(".", 1)[0]):
            break  # ``opt = self.optimizers()``: the zero_grad goes after the optimizer exists
        index -= 1
    if index == 0 and is_docstring(block[0]) and len(block) > 1:
        index = 1
    return index


def already_zeroed(ctx: FileContext, events: list[Event], index: int, zero: Event) -> bool:
    """The statement just above ``index`` is a zero_grad that clears what ``zero`` clears."""
    return any(e.index == index - 1 and e.kind == "zero_grad" and e.direct and zeroes_for(ctx, e.owner, zero.owner) is True for e in events)
