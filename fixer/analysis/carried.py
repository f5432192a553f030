"""Values carried from one training iteration into the next with their autograd graph.

An *iteration* is the body of the innermost loop that backpropagates on every pass, or a method
(``train_step``) that backpropagates once per call: its ``self`` attributes outlive the call. A
value is *carried* when the iteration reads it before any assignment that always runs in that
pass (so the read sees the previous pass's value) and stores a graph-carrying value into it: a
name or ``self`` attribute (``out, hidden = rnn(x, hidden)``) or a container that is appended to
(``cache.append(h)`` ... ``cache[0]``).

``carried_values`` keeps those whose previous-pass value feeds this pass's backward and whose
graph was already backpropagated (the stored value fed its own pass's loss, or is built from its
own previous value): the second backward then walks a freed graph. A value detached anywhere on
the way (``detach``, ``repackage_hidden``, a helper returning a detached value), a backward that
keeps its graph (``create_graph``) or ``autograd.grad`` (which stops at its inputs) end the
analysis with no report."""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass
from typing import Iterator, Optional

from fixer.analysis.calls import BackwardCall, backward_calls
from fixer.analysis.carried_shape import initial_value, shape_of
from fixer.analysis.carried_guards import carries_graph, cut_somewhere, inplace_alias_cut, invariant_definitions, reset_by_call_before
from fixer.analysis.carried_flow import Feeding, always_runs, runs_on_every_pass, blocks_around, contains, dominates, surely_defines, end_position, inside, mutated_base, names_in, nodes_inside, position, statement_effect
from fixer.analysis.graph import GraphFacts, facts
from fixer.analysis.method_stores import method_stores
from fixer.analysis.names import dotted
from fixer.analysis.object_fields import RESETS, field_initials, is_container, is_empty_container, managed_elsewhere, object_manages, project_object_class
from fixer.analysis.passes import pass_body
from fixer.analysis.returned_reads import read_names
from fixer.analysis.scopes import Scope, enclosing_loops, nodes_of, scope_nodes, scopes
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.call_sites import argument_of, parameter_position
from fixer.analysis.threaded import persistent_argument, returned_into
from fixer.analysis.training_calls import training_calls
from fixer.context import FileContext
from fixer.analysis.vocabulary import SEQUENCE_ADDS_ONE

CONTAINER_STORES = SEQUENCE_ADDS_ONE
CALL_STATEMENTS = frozenset({ast.Expr})


@dataclass(frozen=True)
class Iteration:
    node: ast.AST  # the loop, or the method when one call is one training step
    backward: BackwardCall  # an unconditional backward call of every pass
    per_call: bool

    @property
    def body(self) -> list[ast.stmt]:
        """The statements of one pass (a loop's filter ``if`` selects the passes: ``passes.py``)."""
        return self.node.body if self.per_call else pass_body(self.node)


@dataclass(frozen=True)
class CarriedValue:
    name: str  # "hidden", "self.memory", "cache"
    container: bool  # a list/deque/dict that accumulates values across passes
    iteration: Iteration
    read: ast.expr  # first read that sees the previous pass's value
    use: ast.expr  # the read whose value feeds this pass's backward
    stores: tuple[tuple[ast.stmt, ast.expr], ...]  # (statement, stored graph-carrying value)
    initial: Optional[ast.expr]  # the value before the first pass, if known
    defined_before: bool  # the name surely exists when the first pass starts
    shape: str  # "tensor", "tuple", "dict" or "unknown"
    read_after_store: bool  # a container read in the same pass after a store sees this pass's value too
    stored_elsewhere: bool = False  # a ``self`` container filled by other methods of the class (``act``)


def iterations(ctx: FileContext, scope: Scope) -> list[Iteration]:
    found: dict[int, Iteration] = {}
    calls = backward_calls(ctx, scope)
    for call in calls:
        if call.kind == "autograd.grad" or _keeps_graph(call, "create_graph"):
            continue
        stmt = ctx.statement_of(call.node)
        loops = enclosing_loops(ctx, stmt, scope)
        if loops:
            if runs_on_every_pass(ctx, stmt, loops[0], [c.node for c in calls]):
                found.setdefault(id(loops[0]), Iteration(loops[0], call, False))
        elif (scope.self_name or carrying_parameters(ctx, scope)) and (
            always_runs(ctx, stmt, scope.node) or runs_on_every_pass(ctx, stmt, scope.node, [c.node for c in calls])
        ):
            found.setdefault(id(scope.node), Iteration(scope.node, call, True))
    for call in training_calls(ctx, scope):  # a loop whose every pass calls a step function
        stmt = ctx.statement_of(call.node)
        loops = enclosing_loops(ctx, stmt, scope)
        if loops and id(loops[0]) not in found and runs_on_every_pass(ctx, stmt, loops[0], [c.node for c in calls]):
            found[id(loops[0])] = Iteration(loops[0], call, False)
    return list(found.values())


def carrying_parameters(ctx: FileContext, scope: Scope) -> frozenset[str]:
    """Parameters of a plain function that outlive its call: a running value the caller's loop
    binds back (``total = step(x, total)``), or a container or buffer the loop hands to every call.
    Such a function, backpropagating once per call, is one iteration of its caller's loop."""
    node = scope.node
    if scope.self_name or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return frozenset()

    def compute() -> frozenset[str]:
        names = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
        return frozenset(n for n in names if returned_into(ctx, scope, n) or persistent_argument(ctx, scope, n))

    return ctx.memo(("carrying_parameters", id(node)), compute)


def _carried_by_caller(ctx: FileContext, scope: Scope, name: str) -> bool:
    """The caller's loop (in this file or one importing it) already carries what it passes for the
    parameter ``name`` (its step call backpropagates it): that finding, with its cut in the loop,
    stands for this one."""
    position = parameter_position(scope, name)
    for own, caller, call in project_call_sites(ctx, scope):
        argument = argument_of(call, name, position) if call is not None and position is not None else None
        if caller is not scope and isinstance(argument, ast.Name):
            if any(v.name == argument.id for v in carried_values(own, caller)):
                return True
    return False


def _keeps_graph(call: BackwardCall, flag: str) -> bool:
    keyword = call.keyword(flag)
    return keyword is not None and not (isinstance(keyword.value, ast.Constant) and not keyword.value.value)


def carried_values(ctx: FileContext, scope: Scope) -> list[CarriedValue]:
    """(Memoised.) A scope asked again while it is being computed (functions calling each other
    in loops, through ``_carried_by_caller``) answers nothing."""
    if not backward_calls(ctx, scope) and not training_calls(ctx, scope):
        return []  # no iteration, no object buffer read (asked of every scope: most make no backward call)
    busy = ctx.memo("carried_values_busy", set)
    if id(scope.node) in busy:
        return []

    def compute() -> list[CarriedValue]:
        busy.add(id(scope.node))
        try:
            return list(_find(ctx, scope))
        finally:
            busy.discard(id(scope.node))

    return ctx.memo(("carried_values", id(scope.node)), compute)


def _find(ctx: FileContext, scope: Scope) -> Iterator[CarriedValue]:
    its = iterations(ctx, scope)
    if not scope.self_name and all(it.per_call for it in its):
        yield from _object_buffers(ctx, scope)
    if not its:
        return
    graph = facts(ctx, scope)
    nodes = scope_nodes(scope)
    for it in its:
        body_nodes = [n for n in nodes_inside(ctx, scope, nodes, it.node) if not _in_header(ctx, n, it.node)]
        backward_stmt = ctx.statement_of(it.backward.node)
        feeding = Feeding(ctx, it.body, it.backward.target, backward_stmt, names=lambda e: read_names(ctx, e))
        for name, defs in sorted(_stored_names(ctx, graph, it).items()):
            if it.per_call and not scope.self_name and _carried_by_caller(ctx, scope, name):
                continue
            found = _carried_name(ctx, scope, graph, it, feeding, body_nodes, name, defs)
            if found:
                yield found
        for name, stores in sorted(_container_stores(ctx, graph, body_nodes).items()):
            if it.per_call and not scope.self_name and (name not in carrying_parameters(ctx, scope) or _carried_by_caller(ctx, scope, name)):
                continue
            found = _carried_container(ctx, scope, graph, it, feeding, body_nodes, name, stores)
            if found:
                yield found
        if it.per_call and scope.self_name:
            own = _container_stores(ctx, graph, body_nodes)
            wanted = {n.split(".", 1)[1] for n in feeding.live if n.startswith(f"{scope.self_name}.") and n.count(".") == 1 and n not in own}
            for name, stores in sorted(_method_stores(ctx, scope, wanted).items()):
                if name in own or managed_elsewhere(ctx, scope, name):
                    continue
                found = _carried_container(ctx, scope, graph, it, feeding, body_nodes, name, stores)
                if found:
                    yield dataclasses.replace(found, read_after_store=True, stored_elsewhere=True)


def _method_stores(ctx: FileContext, scope: Scope, wanted: set[str]) -> dict[str, list[tuple[ast.stmt, ast.expr]]]:
    """``self.log_probs.append(dist.log_prob(a))`` in other methods of the class (an agent's
    ``act``) for the ``wanted`` attributes this method reads into its loss, keyed with ``scope``'s
    own name for ``self``."""
    found: dict[str, list[tuple[ast.stmt, ast.expr]]] = {}
    if not wanted:
        return found
    filling = re.compile(r"\.(?:%s)\s*\.\s*(?:%s)\b" % ("|".join(map(re.escape, sorted(wanted))), "|".join(sorted(CONTAINER_STORES))))
    for other in scopes(ctx):
        if other.class_node is None or other.class_node is not scope.class_node or other is scope or not other.self_name:
            continue
        if not ctx.mentions(other.node, filling):
            continue  # cheap gate: this method never fills one of the wanted containers
        calls = [
            n
            for n in scope_nodes(other)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in CONTAINER_STORES and n.args
            and isinstance(n.func.value, ast.Attribute) and n.func.value.attr in wanted and dotted(n.func.value.value) == other.self_name
        ]
        if not calls:
            continue
        graph = facts(ctx, other)
        for call in calls:
            stmt = ctx.statement_of(call)
            if carries_graph(ctx, graph, call.args[-1], stmt):
                found.setdefault(f"{scope.self_name}.{call.func.value.attr}", []).append((stmt, call.args[-1]))
    return found


def _object_buffers(ctx: FileContext, scope: Scope) -> Iterator[CarriedValue]:
    """A function that backpropagates once per call (``finish_episode``) reading a list of a
    module-level object (``policy.saved_log_probs``) that other functions fill with graph-carrying
    values and nothing ever empties: each call's loss walks every earlier call's freed graph."""
    if scope.self_name or isinstance(scope.node, ast.Module):
        return
    calls = [c for c in backward_calls(ctx, scope) if c.kind != "autograd.grad" and not _keeps_graph(c, "create_graph")]
    calls = [c for c in calls if not enclosing_loops(ctx, ctx.statement_of(c.node), scope) and always_runs(ctx, c.node, scope.node)]
    if not calls:
        return
    it = Iteration(scope.node, calls[0], True)
    feeding = Feeding(ctx, scope.node.body, it.backward.target, ctx.statement_of(it.backward.node))
    seen: set[str] = set()
    for read in sorted((n for n in scope_nodes(scope) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)), key=position):
        name = dotted(read)
        if not name or name in seen or name.count(".") != 1 or not feeding.reaches(read):
            continue
        seen.add(name)
        owner, attr = name.split(".")
        found = project_object_class(ctx, owner)
        if found is None or owner in {a.arg for a in scope.node.args.args + scope.node.args.kwonlyargs}:
            continue
        initial = next(iter(field_initials(*found, attr)), None)
        if not is_empty_container(initial) or object_manages(ctx, scope, name, found):
            continue
        filling = re.compile(rf"\b{re.escape(attr)}\s*\.\s*(?:append|extend|insert)\b")  # cheap gate per scope
        stores = [
            (stmt, value)
            for other in scopes(ctx)
            if ctx.mentions(other.node, filling)
            for base, found in _container_stores(ctx, facts(ctx, other), scope_nodes(other)).items()
            if base == name
            for stmt, value in found
        ]
        if stores:
            yield CarriedValue(name, True, it, read, read, tuple(stores), initial, True, "container", True, True)


def _in_header(ctx: FileContext, node: ast.AST, loop: ast.AST) -> bool:
    header = [loop.test] if isinstance(loop, ast.While) else [loop.target, loop.iter] if isinstance(loop, (ast.For, ast.AsyncFor)) else []
    return any(contains(part, node) for part in header)


def _stored_names(ctx: FileContext, graph: GraphFacts, it: Iteration) -> dict[str, list[tuple[ast.AST, Optional[ast.expr]]]]:
    """Names the pass assigns that outlive it: any name of a loop, ``self`` attributes of a
    method; for a function, the parameters its caller's loop hands back to the next call, with
    what the function returns into them."""
    scope = graph.scope
    if it.per_call and not scope.self_name:
        stored = {}
        for name in sorted(carrying_parameters(ctx, scope)):
            returned = [(r, v) for r, v in returned_into(ctx, scope, name) or [] if not (isinstance(v, ast.Name) and v.id == name)]
            defs = graph.assignments.get(name, []) + returned
            if defs:
                stored[name] = defs
        return stored
    prefix = f"{scope.self_name}." if it.per_call else ""
    stored: dict[str, list[tuple[ast.AST, Optional[ast.expr]]]] = {}
    for name, (s, v) in graph.assigned_within(it.node):  # by position: not every assignment of the scope for each loop
        if name.startswith(prefix) and name.count(".") <= 1 and inside(ctx, s, it.node):
            stored.setdefault(name, []).append((s, v))
    for stmt in nodes_of(scope, CALL_STATEMENTS):  # ``state.update(h)``: a method's store, as ``state.hidden = h``
        if inside(ctx, stmt, it.node):
            for write in method_stores(ctx, scope, stmt):
                if write.name.startswith(prefix) and write.name.count(".") == 1:
                    stored[write.name] = sorted([*stored.get(write.name, []), (stmt, write.value)], key=lambda d: position(d[0]))
    return stored


def _called_reads(ctx: FileContext, call: ast.Call) -> set[str]:
    """What a call of a summarised project function reads of its arguments (``compute_loss(self)``
    stacking ``self.log_probs``), in this scope's names."""
    return read_names(ctx, call) - names_in(call) if isinstance(call.func, ast.Name) else set()


def _reads(body_nodes: list[ast.AST], name: str) -> list[ast.expr]:
    reads = []
    for node in body_nodes:
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and dotted(node) == name:
            reads.append(node)
        elif isinstance(node, ast.AugAssign) and dotted(node.target) == name:
            reads.append(node.target)
    return sorted(reads, key=position)


def _carried_name(ctx, scope, graph, it, feeding, body_nodes, name, defs) -> Optional[CarriedValue]:
    if isinstance(it.node, (ast.For, ast.AsyncFor)) and name in statement_effect(it.node)[0]:
        return None  # rebound by the loop header before every pass
    first_read = flowing = None
    memo = {id(s): any(w.surely for w in method_stores(ctx, scope, s) if w.name == name) for s, _ in defs if isinstance(s, ast.Expr)}
    defining = [(s, blocks_around(ctx, s)) for s in _defining_statements(ctx, it, defs) if surely_defines(s, name, memo)]
    for read in _reads(body_nodes, name):
        at = position(read)
        if any(any(a <= at <= b for a, b in blocks) and dominates(ctx, s, read) for s, blocks in defining):
            break  # this and later reads see this pass's own value
        if reset_by_call_before(ctx, scope, it, name, read):
            break
        first_read = first_read or read
        if feeding.reaches(read) and position(read) <= end_position(it.backward.node):
            flowing = read
            break
    if flowing is None:
        return None
    # the values that reach the next pass: the last unconditional store and conditional ones after it
    ordered = sorted(defs, key=lambda d: position(d[0]))
    last = max((i for i, (s, _) in enumerate(ordered) if always_runs(ctx, s, it.node)), default=0)
    outgoing = ordered[last:]
    stores = tuple((s, v) for s, v in outgoing if v is not None and carries_graph(ctx, graph, v, s))
    if not stores or cut_somewhere(ctx, scope, graph, name):
        return None
    if not any(_freed_by_own_pass(s, v, name, feeding) for s, v in stores):
        return None
    if inplace_alias_cut(ctx, it.node, name, flowing):
        return None
    initial, defined = initial_value(ctx, scope, graph, it, name)
    if not defined and invariant_definitions(ctx, graph, it.node, defs, first_read):
        return None
    shape = shape_of(ctx, graph, [v for _, v in stores], initial)
    return CarriedValue(name, False, it, first_read, flowing, stores, initial, defined, shape, False)


def _defining_statements(ctx: FileContext, it: Iteration, defs) -> list[ast.AST]:
    """The assignments of a name within the iteration and the statements around them."""
    found: dict[int, ast.AST] = {}
    for stmt, _ in defs:
        if isinstance(stmt, ast.withitem):
            continue
        for node in [stmt, *ctx.ancestors(stmt)]:
            if node is it.node or id(node) in found:
                break  # the statements around this one are in already
            if isinstance(node, ast.stmt):
                found[id(node)] = node
    return list(found.values())


def _freed_by_own_pass(stmt: ast.AST, value: ast.expr, name: str, feeding: Feeding) -> bool:
    """The stored value's graph is backpropagated in the pass that stores it, or the value is
    built from its own previous value (a chain whose older links an earlier backward freed)."""
    defined = statement_effect(stmt)[0] | ({name} if isinstance(stmt, ast.Expr) else set())  # (a method's store defines it)
    mentioned = names_in(value)
    return bool((defined | mentioned) & feeding.live) or name in mentioned


def _container_stores(ctx: FileContext, graph: GraphFacts, body_nodes: list[ast.AST]) -> dict[str, list[tuple[ast.stmt, ast.expr]]]:
    stores: dict[str, list[tuple[ast.stmt, ast.expr]]] = {}
    for node in body_nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CONTAINER_STORES and node.args:
            base = dotted(node.func.value)
            value = node.args[-1]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            base, value = dotted(node.targets[0].value), node.value
        else:
            continue
        if base:
            stmt = ctx.statement_of(node)
            if carries_graph(ctx, graph, value, stmt):
                stores.setdefault(base, []).append((stmt, value))
    return stores


def _carried_container(ctx, scope, graph, it, feeding, body_nodes, name, stores) -> Optional[CarriedValue]:
    initial, defined = initial_value(ctx, scope, graph, it, name)
    if not defined or not is_container(ctx, initial):
        return None
    if name in graph.assignments and any(inside(ctx, s, it.node) for s, _ in graph.assignments[name]):
        return None  # rebuilt within the pass
    for node in body_nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in RESETS and dotted(node.func.value) == name:
            return None
        if isinstance(node, ast.Delete) and any(mutated_base(t) == name for t in node.targets):
            return None
    if cut_somewhere(ctx, scope, graph, name):
        return None
    store_stmts = [s for s, _ in stores]
    reads = _reads(body_nodes, name) + [n for n in body_nodes if isinstance(n, ast.Call) and name in _called_reads(ctx, n)]
    for read in sorted(reads, key=position):
        if any(contains(s, read) for s in store_stmts) or not feeding.reaches(read):
            continue
        if not any(_freed_by_own_pass(s, v, name, feeding) for s, v in stores):
            return None
        after = any(end_position(s) <= position(read) for s in store_stmts)
        return CarriedValue(name, True, it, read, read, tuple(stores), initial, True, "container", after)
    return None
