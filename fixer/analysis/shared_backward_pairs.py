"""The findings of GF105, in the order it reports them: per scope, the loops that backpropagate
losses of one graph one by one (``losses_loops``), then each backward whose graph a later call of
the same pass walks again (``shared_pairs``), with the chain of plain backward statements that
can become one backward of their sum and the statement that would hold it. A pair in a
discriminator loop on an undetached fake is GF103's (its fix makes the graphs independent)."""

from __future__ import annotations

import ast
from typing import Iterator, NamedTuple, Optional

from fixer.analysis.calls import BackwardCall, backward_calls, retains_graph
from fixer.analysis.gradient_effects import HARMLESS_METHODS, Effect, gradient_effect
from fixer.analysis.scopes import LOOPS, Scope, enclosing_loops, scope_nodes, scopes
from fixer.analysis.shared_backwards import (
    all_available_at,
    backward_unit,
    bound_in,
    loop_over_losses,
    mergeable_chain,
    next_sharing,
    standalone,
    strictly_between,
    strictly_inside,
)
from fixer.analysis.bindings import imported_names
from fixer.analysis.graph import Kind, facts
from fixer.analysis.names import dotted
from fixer.analysis.saving_modules import saves_own_weights
from fixer.analysis.shared_graph import Origin, same_pass_later
from fixer.analysis.training_calls import training_calls
from fixer.analysis.undetached_fakes import undetached_fake_lines
from fixer.analysis.wrapped_backward import backward_wrapper_argument
from fixer.context import FileContext
from fixer.nodes import walk


class SharedPair(NamedTuple):
    call: BackwardCall
    partner: BackwardCall  # the first later call of the pass that walks the shared part
    origins: frozenset[Origin]  # where the shared part is built
    chain: list[BackwardCall]  # the calls merged into one backward at chain[host]; empty when not merged
    host: Optional[int]


def _standalone_calls(ctx: FileContext, scope: Scope) -> tuple[list[BackwardCall], list[BackwardCall]]:
    calls = [c for c in backward_calls(ctx, scope) if standalone(ctx, c)]
    steps = [c for c in training_calls(ctx, scope) if standalone(ctx, c)]
    return calls, steps


def losses_loops(ctx: FileContext, scope: Scope) -> Iterator[tuple[BackwardCall, ast.For, list[ast.expr]]]:
    """``for loss in losses: loss.backward()`` over losses of one graph: the call, the loop and
    the tests of the filters around the call."""
    calls, steps = _standalone_calls(ctx, scope)
    for call in calls + steps:
        found = loop_over_losses(ctx, scope, call)
        if found is not None:
            yield call, *found


def shared_pairs(ctx: FileContext, scope: Scope) -> Iterator[SharedPair]:
    calls, steps = _standalone_calls(ctx, scope)
    calls = sorted(calls + steps, key=lambda c: (c.node.lineno, c.node.col_offset)) if steps else calls
    if len(calls) < 2:
        return
    merged, following = set[int](), same_pass_later(ctx, scope, [ctx.statement_of(c.node) for c in calls])
    for index, call in enumerate(calls):
        if id(call.node) in merged or retains_graph(call):
            continue
        later = next_sharing(ctx, scope, call, [calls[i] for i in following[index]])  # only those can run after it in its pass
        if later is None:
            continue
        partner, origins = later
        if _gan_step(ctx, scope, call, partner):
            continue
        if call.kind == "call" or partner.kind == "call":
            yield SharedPair(call, partner, origins, [], None)
            continue
        chain = mergeable_chain(ctx, scope, call, calls[index + 1 :])
        host = merge_host(ctx, scope, chain) if chain else None
        if host is not None:
            merged.update(id(c.node) for c in chain)
            yield SharedPair(call, partner, origins, chain, host)
            continue
        yield SharedPair(call, partner, origins, [], None)


def merge_host(ctx: FileContext, scope: Scope, chain: list[BackwardCall]) -> Optional[int]:
    """The call of ``chain`` whose statement takes the sum's backward: the first, or the last when a
    loss is computed between; None when another name is not bound there or a statement shares
    its line."""
    if not all(ctx.is_own_line(backward_unit(ctx, c)) for c in chain):
        return None
    return next((i for i in (0, len(chain) - 1) if all_available_at(ctx, scope, chain, chain[i])), None)


KEEPING_WEIGHTS = HARMLESS_METHODS | {"zero_grad"}  # calls that change no parameter


def saves_weights(ctx: FileContext, scope: Scope, call: BackwardCall, partner: BackwardCall, origins: frozenset[Origin]) -> bool:
    """A shared evaluation saved the weights of a module it called (a module that saves its own,
    ``Linear -> ReLU -> Linear``, or one applied to a graph) that what runs between the two
    backward calls may change in place: a method called there on an object made with that
    module's name among its arguments (``torch.optim.SGD(model.parameters())``), or on one we cannot
    place. A graph kept for the later call would then raise 'modified by an inplace operation'."""
    graph = facts(ctx, scope)
    saving = {
        name for origin in origins if isinstance(value := origin.value, ast.Call) and graph.is_module(value.func)
        and (name := dotted(value.func))
        and (saves_own_weights(ctx, scope, value.func) or any(graph.kind(a, origin.stmt) >= Kind.LEAF for a in value.args))
    }
    if not saving:
        return False
    receivers = {
        dotted(n.func.value) for stmt in statements_between(ctx, scope, call, partner) for n in walk(stmt)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr not in KEEPING_WEIGHTS
    }
    imported = imported_names(ctx)
    for receiver in receivers - {None}:
        if receiver.partition(".")[0] in imported:
            continue  # torch.randn(...), F.mse_loss(...): a library's function, no object of the program
        bound = [v for _, v in graph.reaching(receiver, ctx.statement_of(partner.node))]
        if not bound or any(not isinstance(v, ast.Call) or _mentions(v.args + [k.value for k in v.keywords], saving) for v in bound):
            return True
    return False


def _mentions(values: list[ast.expr], names: set[str]) -> bool:
    return any(dotted(n) in names for v in values for n in walk(v) if isinstance(n, (ast.Name, ast.Attribute)))


def statements_between(ctx: FileContext, scope: Scope, call: BackwardCall, partner: BackwardCall) -> list[ast.stmt]:
    """The statements that run between the two calls."""
    stmt, other = ctx.statement_of(call.node), ctx.statement_of(partner.node)
    return [n for n in scope_nodes(scope) if isinstance(n, ast.stmt) and strictly_between(n, stmt, other) and not strictly_inside(ctx, other, n)]


def effect_between(ctx: FileContext, scope: Scope, call: BackwardCall, partner: BackwardCall) -> Effect:
    """What the statements that run between the two calls do to gradients and parameters."""
    return gradient_effect(ctx, scope, statements_between(ctx, scope, call, partner))


def loop_call_argument(ctx: FileContext, scope: Scope, call: BackwardCall, loop: ast.For) -> tuple[bool, Optional[ast.expr]]:
    """Whether the loop's backward can take the sum, and the argument that takes it when the call
    is a function that only backpropagates its argument; a call that does more, or whose other
    arguments read the loop's variables (``trainer.step(name, loss)``), cannot."""
    if call.kind != "call":
        return True, None
    argument = backward_wrapper_argument(ctx, scope, call)
    if argument is None or any(_reads(a, bound_in([loop.target])) for a in call.node.args if a is not argument):
        return False, None
    return True, argument


def _reads(expr: ast.expr, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in walk(expr))


def _gan_step(ctx: FileContext, scope: Scope, call: BackwardCall, partner: BackwardCall) -> bool:
    """GF103 reports the real cause here (a discriminator step on an undetached fake); its fix
    makes the graphs independent, so adding retain_graph would only hide it. "Here": in this scope,
    in the innermost loop around both backward calls (a GAN loop elsewhere in a module is another matter)."""
    lines = undetached_fake_lines(ctx)
    if not lines:
        return False
    loops = [n for n in scope_nodes(scope) if isinstance(n, LOOPS)]
    shared = [loop for loop in enclosing_loops(ctx, call.node, scope) if loop.lineno <= partner.node.lineno <= loop.end_lineno]
    around_calls = shared[0] if shared else None
    owners = [s.node for s in scopes(ctx)]
    return any(_innermost(owners, line) is scope.node and _innermost(loops, line) is around_calls for line in lines)


def _innermost(nodes: list[ast.AST], line: int) -> Optional[ast.AST]:
    """The innermost of nested ``nodes`` around ``line`` (a module is around every line)."""
    around = [n for n in nodes if isinstance(n, ast.Module) or n.lineno <= line <= n.end_lineno]
    return max(around, key=lambda n: getattr(n, "lineno", 0), default=None)
