"""``zero_grad()`` in every pass of an inner loop that accumulates, while the step runs after the
loop (GF201's micro-batch form):

    for micro in split(batch):          # or sum(trainer.forward_backward(m) for m in micro_batches)
        optimizer.zero_grad()
        loss_of(micro).backward()
    optimizer.step()                    # applies the last micro-batch's gradient only

Each pass clears what the passes before it accumulated, so the step sees one pass's gradient.
``repeated_zero_grads(ctx)`` lists them: a loop (``for``/``while``, or a comprehension whose
element calls a project function, consumed at once) whose every pass runs, unconditionally and
directly or in the function it calls, one ``zero_grad`` and after it a backward that fills
``.grad``, and no step; then, in the block holding the loop, the next protocol event is a plain
step of the optimizer that zero_grad clears, run unconditionally. Nothing may read or write
``.grad`` in the pass or before the step (per-sample gradients collected on purpose).
"""

from __future__ import annotations

import ast
from typing import Iterator, NamedTuple, Optional

from fixer.analysis.call_events import Event, block_events, call_events, resolved_callee
from fixer.analysis.protocol import blocks, is_plain_step, optimizer_scopes, touches_grads, zeroes_for
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.scopes import Scope, scope_of
from fixer.context import FileContext
from fixer.nodes import walk

EAGER = (ast.ListComp, ast.SetComp, ast.DictComp)
CONSUMERS = frozenset({"sum", "list", "tuple", "sorted", "max", "min", "set"})  # run a generator to its end


class PassEvent(NamedTuple):
    kind: str
    owner: Optional[str]  # in the loop's scope's names
    call: ast.Call  # the call itself (in a called function's file when ``via`` is set)
    conditional: bool
    spelling: str
    via: Optional[ast.Call]  # the call of this scope that runs it


class RepeatedZeroGrad(NamedTuple):
    scope: Scope
    loop: ast.AST  # the For/While statement or the comprehension
    zero: PassEvent
    step: Event  # in the block holding the loop
    block: list[ast.stmt]


def repeated_zero_grads(ctx: FileContext) -> Iterator[RepeatedZeroGrad]:
    for scope in optimizer_scopes(ctx):
        for block in blocks(scope):
            events = block_events(ctx, scope, block, through_calls=True)
            if not any(e.kind == "zero_grad" for e in events):
                continue
            for index, stmt in enumerate(block):
                for loop, passed in _loops(ctx, scope, stmt):
                    found = _wiping(ctx, scope, block, events, index, loop, passed)
                    if found is not None:
                        yield found


def _loops(ctx: FileContext, scope: Scope, stmt: ast.stmt) -> Iterator[tuple[ast.AST, list[PassEvent]]]:
    """The repetitions ``stmt`` is or holds, with the protocol events of one pass."""
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)) and not stmt.orelse:
        inner = block_events(ctx, scope, stmt.body, through_calls=True)
        yield stmt, [PassEvent(e.kind, e.owner, e.call, e.conditional, e.spelling, e.via) for e in inner]
        return
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    for node in walk(stmt):
        consumed = isinstance(node, EAGER) or isinstance(node, ast.GeneratorExp) and _consumed(ctx, node)
        element = getattr(node, "elt", None)
        if consumed and isinstance(element, ast.Call) and all(not g.ifs for g in node.generators):
            events = call_events(ctx, scope, element)
            if events:
                yield node, [PassEvent(e.kind, e.owner, e.call, e.conditional, e.spelling, element) for e in events]


def _consumed(ctx: FileContext, generator: ast.GeneratorExp) -> bool:
    call = ctx.parent(generator)
    return isinstance(call, ast.Call) and call.args == [generator] and isinstance(call.func, ast.Name) and call.func.id in CONSUMERS


def _wiping(ctx, scope, block, events, index, loop, passed: list[PassEvent]) -> Optional[RepeatedZeroGrad]:
    zeros = [e for e in passed if e.kind == "zero_grad"]
    if len(zeros) != 1 or any(e.kind == "step" for e in passed):
        return None
    zero = zeros[0]
    backward = [e for e in passed[passed.index(zero) + 1 :] if e.kind == "backward" and e.spelling != "owner"]
    if zero.conditional or zero.owner is None or zero.call.args or any(k.arg != "set_to_none" for k in zero.call.keywords):
        return None
    if not backward or any(e.conditional for e in backward):
        return None
    own = {id(e.call) for e in passed} | {id(e.via) for e in passed if e.via is not None}
    if any(e.index == index and id(e.call) not in own and id(e.site) not in own for e in events):
        return None  # the statement does more than the loop
    step = next((e for e in events if e.index > index), None)
    if step is None or step.kind != "step" or step.conditional or not is_plain_step(step):
        return None
    if zeroes_for(ctx, zero.owner, step.owner) is not True:
        return None
    objects = {zero.owner, step.owner}
    if any(touches_grads(ctx, s, objects) for s in block[index + 1 : step.index]) or _pass_touches_grads(ctx, scope, loop, passed, zero):
        return None
    return RepeatedZeroGrad(scope, loop, zero, step, block)


def _pass_touches_grads(ctx: FileContext, scope: Scope, loop: ast.AST, passed: list[PassEvent], zero: PassEvent) -> bool:
    """Something in the loop's body, or in a function a pass calls, reads or writes ``.grad``."""
    bodies = [(ctx, loop.body if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) else [])]
    for via in {id(e.via): e.via for e in passed if e.via is not None}.values():
        callee = resolved_callee(ctx, scope, via)
        if callee is None:
            return True  # (its events were read, so it resolves: only a changed file gets here)
        bodies.append((callee.ctx or ctx, callee.node.body))
    return any(
        touches_grads(own, s, set()) for own, body in bodies for s in body if not (isinstance(s, ast.Expr) and s.value is zero.call)
    )


def reported_call(ctx: FileContext, found: RepeatedZeroGrad) -> ast.Call:
    """The zero_grad call when it is in this file, else the call of this file that runs it."""
    via = found.zero.via
    callee = resolved_callee(ctx, found.scope, via) if via is not None else None
    return found.zero.call if via is None or callee is not None and (callee.ctx or ctx) is ctx else via


class Move(NamedTuple):
    zero: ast.stmt  # the zero_grad statement to take out of the pass
    anchor: ast.stmt  # the step statement it goes after
    receiver: str  # the optimizer, as the anchor's function names it


def move_after_step(ctx: FileContext, found: RepeatedZeroGrad) -> Optional[Move]:
    """Where GF201's fix moves the zero_grad: out of the pass, to just after the step, in this
    file only; a function that holds either call (``forward_backward``, ``optim_step``) is changed
    only where this is its one call in the project (else the step's call in this block is the anchor)."""
    zero, step = found.zero, found.step
    zero_stmt = _own_statement(ctx, found.scope, zero.call, zero.via)
    if zero_stmt is None:
        return None
    if step.via is None:
        receiver = step.call.args[0] if step.spelling == "scaler" else step.call.func.value
        return Move(zero_stmt, found.block[step.index], ctx.text(receiver)) if step.direct else None
    inner = _own_statement(ctx, found.scope, step.call, step.via)
    if inner is not None and step.spelling != "scaler":
        return Move(zero_stmt, inner, ctx.text(step.call.func.value))
    return Move(zero_stmt, found.block[step.index], step.owner) if step.owner else None


def _own_statement(ctx: FileContext, scope: Scope, call: ast.Call, via: Optional[ast.Call]) -> Optional[ast.stmt]:
    """The statement that is exactly ``call``, in this file, in the scope or in the function of
    this file that ``via`` calls from its one call site in the project."""
    if via is not None:
        callee = resolved_callee(ctx, scope, via)
        if callee is None or (callee.ctx or ctx) is not ctx or [c for _, _, c in project_call_sites(ctx, callee)] != [via]:
            return None
        if scope_of(ctx, call).node is not callee.node:
            return None  # in a helper the function calls in turn
    stmt = ctx.statement_of(call)
    return stmt if isinstance(stmt, ast.Expr) and stmt.value is call else None
