"""Can anything walk a backward call's graph again after it returns?

``walked_again(ctx, scope, call)`` answers None only when it is proven that nothing can: the
graph is built in this scope (in the same loop iteration when the call is in a loop), no later
backward or ``autograd.grad`` reaches any statement that built it, and no graph-carrying value it
is built from leaves what we can see (returned, yielded, stored on an object, appended to a
container we do not own, read by a nested function, passed after the call to a function that is
not known to leave graphs alone). Otherwise it returns a short reason, for messages and tests.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.calls import BackwardCall, backward_calls
from fixer.analysis.class_model import class_methods
from fixer.analysis.importers import project_constructions
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.names import dotted, qualified
from fixer.analysis.retained import MUTATORS, GraphSources, Sources, sources
from fixer.analysis.scopes import NESTED, Scope, enclosing_loops, is_static, scope_nodes, scopes
from fixer.context import FileContext
from fixer.nodes import walk

# callees known not to backpropagate through (or keep) a tensor they are given
HARMLESS_BUILTINS = frozenset(
    {"print", "len", "float", "int", "str", "repr", "format", "isinstance", "round", "abs", "min", "max", "bool",
     "hasattr", "getattr", "id", "type", "enumerate", "zip", "range", "sorted", "any", "all", "callable"}
)
HARMLESS_METHODS = frozenset(
    {"log", "log_dict", "info", "debug", "warning", "warn", "error", "add_scalar", "add_scalars", "add_histogram",
     "set_postfix", "set_description", "write", "step", "update", "format"}
)
OPAQUE = frozenset({"locals", "vars", "exec", "eval", "globals"})


def walked_again(ctx: FileContext, scope: Scope, call: BackwardCall) -> Optional[str]:
    """None if nothing can backpropagate through ``call``'s graph after it; else why it might."""
    graph = sources(ctx, scope)
    own = graph.of(call.target, call.node)
    if own.unknown:
        return "its graph may come from outside this function"
    loops = enclosing_loops(ctx, call.node, scope)
    if own.back_loops & {id(loop) for loop in loops}:
        return "its graph is carried over from a previous iteration"  # a sum built by an inner loop is not
    if not own.defs:
        return "no statement building its graph was found"
    if loops and any(not _within(ctx, stmt, loops[0]) for stmt in own.defs.values()):
        return "part of its graph is built before the loop and reused every iteration"
    for check in (_higher_order, _later_backward, _escape):
        reason = check(ctx, scope, graph, call, own)
        if reason:
            return reason
    return None


def _higher_order(ctx, scope, graph, call, own) -> Optional[str]:
    for other in backward_calls(ctx, scope):
        keyword = other.keyword("create_graph")
        if keyword is not None and not (isinstance(keyword.value, ast.Constant) and keyword.value.value is False):
            return "the function computes higher-order gradients (create_graph)"
    for node in ctx.memo(("opaque_or_saved", id(scope.node)), lambda: [n for n in scope_nodes(scope) if _opaque(n) or _saved(n)]):
        if _opaque(node):  # (the scope's few such nodes found once, not once for each backward)
            return f"the function calls {node.func.id}()"
        if _saved(node) and _after(node, call.node):
            return "saved tensors may be read after the backward"
    return None


def _opaque(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in OPAQUE


def _saved(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and (node.attr == "grad_fn" or node.attr.startswith("_saved_"))


def _later_backward(ctx, scope, graph: GraphSources, call: BackwardCall, own: Sources) -> Optional[str]:
    others = backward_calls(ctx, scope)
    reaching = _backwards_reaching(ctx, scope, graph)  # only those can reach a statement of ``own``
    for index in sorted({i for stmt in own.defs for i in reaching.get(stmt, ())}):
        other = others[index]
        if other.node is call.node:
            continue
        reached = _reached_later(ctx, scope, graph, other.target, other.node, call.node)
        if reached & own.defs.keys():
            return f"line {other.node.lineno} backpropagates through the same graph"
    return None


def _reached_later(ctx, scope, graph: GraphSources, expr: ast.expr, at: ast.AST, call: ast.AST) -> set[int]:
    """Statements ``expr`` (evaluated at ``at``) reaches when ``at`` runs after ``call``: all of
    them when ``at`` follows it, only those from a previous iteration when ``at`` precedes it in a
    loop around both."""
    if _after(at, call):
        return set(_built(ctx, scope, graph, expr, at)[0])
    shared = set(map(id, enclosing_loops(ctx, at, scope))) & set(map(id, enclosing_loops(ctx, call, scope)))
    return set(_built(ctx, scope, graph, expr, at)[1]) if shared else set()


def _backwards_reaching(ctx, scope, graph: GraphSources) -> dict[int, list[int]]:
    """For each statement building a backward call's graph, the calls (their index among the
    scope's) whose graph it builds: found once for the scope, not once for each pair of calls."""

    def compute() -> dict[int, list[int]]:
        found: dict[int, list[int]] = {}
        for index, other in enumerate(backward_calls(ctx, scope)):
            for stmt in _built(ctx, scope, graph, other.target, other.node)[0]:
                found.setdefault(stmt, []).append(index)
        return found

    return ctx.memo(("backwards_reaching", id(scope.node)), compute)


def _built(ctx, scope, graph: GraphSources, expr: ast.expr, at: ast.AST) -> tuple[frozenset[int], frozenset[int]]:
    """The statements building ``expr``'s graph at ``at``, and those of them reached from a previous
    iteration: asked again for every backward call of the scope, so found once."""

    def compute() -> tuple[frozenset[int], frozenset[int]]:
        found = graph.of(expr, at)
        return frozenset(found.defs), frozenset(found.back_defs)

    return ctx.memo(("retained_built", id(scope.node), id(expr), id(at)), compute)


def _escape(ctx, scope, graph: GraphSources, call: BackwardCall, own: Sources) -> Optional[str]:
    escapes, reaching = _escapes(ctx, scope, graph), _escapes_reaching(ctx, scope, graph)
    for index in sorted({i for stmt in own.defs for i in reaching.get(stmt, ())}):
        node, _, what, after = escapes[index]
        if node is call.node:
            continue  # the backward itself (or the helper call that runs it: ``caller_walks``)
        if not after or _after(node, call.node):
            return f"a value of its graph {what} (line {node.lineno})"
    for name in _names_read_elsewhere(ctx, scope):
        if set(graph.of_anywhere(name).defs) & own.defs.keys():
            return f"`{name}` is read by another function, which may backpropagate through it"
    return None


def returned_only_for_numbers(ctx: FileContext, scope: Scope, node: ast.Return, value: ast.expr) -> bool:
    """``value`` (the whole result of ``node``, or one element of its returned tuple) reaches no
    caller that could backpropagate through it (``callers_only_read``)."""
    if node.value is value:
        return callers_only_read(ctx, scope, None)
    elts = node.value.elts if isinstance(node.value, ast.Tuple) else []
    slot = next((i for i, e in enumerate(elts) if e is value), None)
    return slot is not None and callers_only_read(ctx, scope, slot)


def _escapes(ctx, scope, graph) -> list[tuple[ast.AST, ast.expr, str, bool]]:
    """(node, value, how it escapes, only after the backward) for each value of the scope that may
    leave it, in order: found once for the scope, not once for each of its backward calls."""

    def compute() -> list[tuple[ast.AST, ast.expr, str, bool]]:
        local = set(graph.graph.assignments)
        return [(node, *escape) for node in scope_nodes(scope) for escape in _escaping_values(ctx, scope, graph, node, local)]

    return ctx.memo(("retained_escapes", id(scope.node)), compute)


def _escapes_reaching(ctx, scope, graph) -> dict[int, list[int]]:
    """For each statement of the scope, the escapes (their index in ``_escapes``) of a value it
    builds: a statement of the graph that stores (``self.h = self.net(x)``) stores part of it."""

    def compute() -> dict[int, list[int]]:
        found: dict[int, list[int]] = {}
        for index, (node, value, _, _) in enumerate(_escapes(ctx, scope, graph)):
            for stmt in {id(node), *_built(ctx, scope, graph, value, node)[0]}:
                found.setdefault(stmt, []).append(index)
        return found

    return ctx.memo(("escapes_reaching", id(scope.node)), compute)


def _escaping_values(ctx, scope, graph, node, local: set[str]) -> Iterator[tuple[ast.expr, str, bool]]:
    if isinstance(node, ast.Return) and node.value is not None:
        # each part of the result escapes unless every caller drops it or only reads numbers from it
        parts = list(enumerate(node.value.elts)) if isinstance(node.value, ast.Tuple) else [(None, node.value)]
        for slot, part in parts:
            if not callers_only_read(ctx, scope, slot):
                yield part, "is returned", False
    elif isinstance(node, (ast.Yield, ast.YieldFrom)) and node.value is not None:
        yield node.value, "is returned", False
    elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for element in walk(target):
                if isinstance(element, ast.Attribute) and isinstance(element.ctx, ast.Store):
                    if not _field_for_numbers(ctx, scope, node, element):
                        yield node.value, f"is stored on `{dotted(element) or 'an object'}`", False
                elif isinstance(element, ast.Subscript) and isinstance(element.ctx, ast.Store) and not _owned(element, local):
                    yield node.value, "is stored in a container this function does not own", False
                elif isinstance(element, ast.Name) and element.id in _declared_global(scope):
                    yield node.value, f"is stored in the global `{element.id}`", False
    elif isinstance(node, ast.Call):
        func = node.func
        arguments = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS and not _owned(func.value, local):
            for argument in arguments:
                yield argument, f"is added to `{dotted(func.value) or 'a container'}`", False
        elif not _harmless(ctx, graph, node):  # escapes if the call comes after the backward
            for argument in arguments:
                yield argument, f"is passed to `{dotted(func) or 'a function'}` after the backward", True


MAX_RETURN_DEPTH = 2  # callers that return a helper's result in turn, followed this far up
READING_METHODS = frozenset({"item", "tolist", "numpy", "cpu", "detach", "size", "dim", "numel"})


def callers_only_read(ctx: FileContext, scope: Scope, slot: Optional[int], depth: int = MAX_RETURN_DEPTH) -> bool:
    """``scope`` is a plain function used only by calls, in this file or in the files importing it
    (``project_call_sites``), each dropping its result or
    binding it (or its element ``slot`` of a returned tuple) to names that the caller reads only
    for numbers (``loss.item()``, ``print(loss)``, ``float(loss)``) or returns in turn to callers
    that do (``return loss``, ``return model, loss``: followed ``depth`` functions up): no caller
    can backpropagate through it."""

    def compute() -> bool:
        node = scope.node
        if scope.self_name or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.decorator_list and not is_static(node):
            return False
        sites = list(project_call_sites(ctx, scope))
        if not sites:
            return False
        for own, caller, site in sites:
            if site is None or caller is scope:
                return False
            stmt = own.parent(site)
            if isinstance(stmt, ast.Expr):
                continue
            if not isinstance(stmt, ast.Assign) or stmt.value is not site:
                return False
            if not all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Starred)) for t in stmt.targets for n in walk(t) if isinstance(n, ast.expr)):
                return False  # stored on an object or in a container
            targets = [t.elts[slot] if slot is not None and isinstance(t, (ast.Tuple, ast.List)) and not any(isinstance(e, ast.Starred) for e in t.elts) and slot < len(t.elts) else t for t in stmt.targets]
            bound = {n.id for t in targets for n in walk(t) if isinstance(n, ast.Name)}
            reads = [n for n in scope_nodes(caller) if isinstance(n, ast.Name) and n.id in bound and isinstance(n.ctx, ast.Load)]
            if not all(read_for_numbers(own, n) or _returned_to_readers(own, caller, n, depth) for n in reads):
                return False
        return True

    return ctx.memo(("callers_only_read", id(scope.node), slot, depth), compute)


def _returned_to_readers(ctx: FileContext, caller: Scope, read: ast.Name, depth: int) -> bool:
    """``read`` is the caller's whole result, or one element of its returned tuple, and the
    caller's own callers only read that for numbers."""
    parent = ctx.parent(read)
    if depth <= 0 or not isinstance(parent, (ast.Return, ast.Tuple)):
        return False
    if isinstance(parent, ast.Return):
        return callers_only_read(ctx, caller, None, depth - 1)
    outer = ctx.parent(parent)
    slot = next(i for i, e in enumerate(parent.elts) if e is read)
    return isinstance(outer, ast.Return) and outer.value is parent and callers_only_read(ctx, caller, slot, depth - 1)


def _field_for_numbers(ctx: FileContext, scope: Scope, stmt: ast.stmt, target: ast.Attribute) -> bool:
    """``self.attr = value`` at the top of a method whose field nothing can backpropagate through
    later: no other method of the class reads it, none hands its object on (``helper(self)``),
    this method reads it only after the store, and
    the objects the file constructs (``trainer = Trainer(...)``) are used only to call methods and
    to read fields, this one for numbers (``trainer.loss.item()``, ``loss = trainer.loss`` then
    ``print(loss)``)."""
    cls, me = scope.class_node, scope.self_name
    if cls is None or not me or not (isinstance(target.value, ast.Name) and target.value.id == me) or ctx.parent(stmt) is not scope.node:
        return False
    attr = target.attr

    def reads(method: Scope) -> list[ast.Attribute]:
        return [n for n in scope_nodes(method) if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Load)
                and isinstance(n.value, ast.Name) and n.value.id == method.self_name]

    def compute() -> bool:
        sites, methods = project_constructions(ctx, cls), class_methods(ctx, cls).values()
        if not sites or any(reads(m) for m in methods if m.node is not scope.node) or any(_hands_itself(ctx, m) for m in methods):
            return False
        if any((n.lineno, n.col_offset) < (stmt.end_lineno, stmt.end_col_offset) for n in reads(scope)):
            return False  # the previous call's value is read before this call replaces it
        for own, owner, call in sites:
            instance = own.parent(call).targets[0].id
            for other in scopes(own):
                for node in scope_nodes(other):
                    if not (isinstance(node, ast.Name) and node.id == instance and isinstance(node.ctx, ast.Load)):
                        continue
                    use = own.parent(node)
                    if other is not owner or not isinstance(use, ast.Attribute):
                        return False  # passed on, stored, or read by another function
                    if use.attr == attr and not _numbers_only(own, owner, use):
                        return False
        return True

    return ctx.memo(("field_for_numbers", id(scope.node), id(stmt), attr), compute)


def _hands_itself(ctx: FileContext, method: Scope) -> bool:
    """The method uses its object otherwise than through an attribute (``compute_loss(self)``,
    ``return self``): whoever gets it may read any field."""
    return any(
        isinstance(n, ast.Name) and n.id == method.self_name and isinstance(n.ctx, ast.Load) and not isinstance(ctx.parent(n), ast.Attribute)
        for n in scope_nodes(method)
    )


def _numbers_only(ctx: FileContext, owner: Scope, read: ast.expr) -> bool:
    """``read`` is turned into a number on the spot, or bound to a name that only is."""
    if read_for_numbers(ctx, read):
        return True
    assign = ctx.parent(read)
    if not (isinstance(assign, ast.Assign) and assign.value is read and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name)):
        return False
    name = assign.targets[0].id
    return all(read_for_numbers(ctx, n) for n in scope_nodes(owner) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load))


def read_for_numbers(ctx: FileContext, name: ast.Name) -> bool:
    parent = ctx.parent(name)
    if isinstance(parent, ast.Attribute) and parent.attr in READING_METHODS:
        return isinstance(ctx.parent(parent), ast.Call)
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id in ("print", "float", "int", "len", "str", "repr", "format"):
        return True
    return isinstance(parent, ast.FormattedValue)


def _harmless(ctx: FileContext, graph: GraphSources, node: ast.Call) -> bool:
    func = node.func
    name = qualified(ctx, func) or ""
    if name in HARMLESS_BUILTINS or (name.startswith("torch.") and not name.startswith("torch.autograd")):
        return True
    if isinstance(func, ast.Attribute) and (func.attr in HARMLESS_METHODS or func.attr in MUTATORS):
        return True  # logging, optimizer/scheduler steps; mutations of owned containers are tracked
    if name.endswith("backward") or name.endswith(".grad"):
        return True  # a backward call: checked as one
    if graph.graph.is_module(func):
        return True  # a forward pass: builds on the graph, never walks it backwards
    return isinstance(func, ast.Attribute) and bool(graph.of(func.value, node).defs)  # a tensor method


def _owned(node: ast.expr, local: set[str]) -> bool:
    while isinstance(node, ast.Subscript):
        node = node.value
    name = dotted(node)
    return bool(name) and "." not in name and name in local


def _declared_global(scope: Scope) -> set[str]:
    def compute() -> set[str]:
        return {n for node in scope_nodes(scope) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}

    return compute() if scope.ctx is None else scope.ctx.memo(("declared_global", id(scope.node)), compute)


def _names_read_elsewhere(ctx: FileContext, scope: Scope) -> set[str]:
    """Names of this scope read by a nested function or lambda (or, for the module, by any function)."""

    def compute() -> set[str]:
        if isinstance(scope.node, ast.Module):  # a function's own parameters and locals are not the module's names
            return {name for s in scopes(ctx) if s.node is not scope.node for name in _loads(s.node) - _own_locals(s)}
        return {name for node in scope_nodes(scope) if isinstance(node, NESTED) for name in _loads(node)}

    return ctx.memo(("names_read_elsewhere", id(scope.node)), compute)


def _loads(root: ast.AST) -> set[str]:
    return {n.id for n in walk(root) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _own_locals(function: Scope) -> set[str]:
    """Names a function binds at its own level (parameters, assignments), less those it declares global."""
    args = function.node.args
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} | {a.arg for a in (args.vararg, args.kwarg) if a}
    nodes = scope_nodes(function)
    stored = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    declared = {name for n in nodes if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
    return (params | stored) - declared


def _after(node: ast.AST, call: ast.AST) -> bool:
    return (node.lineno, node.col_offset) >= (call.end_lineno, call.end_col_offset)


def _within(ctx: FileContext, node: ast.AST, container: ast.AST) -> bool:
    return node is container or any(parent is container for parent in ctx.ancestors(node))
