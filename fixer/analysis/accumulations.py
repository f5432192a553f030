"""Running totals (GF301's query): ``acc += v``, ``acc = acc + v``, ``acc.append(v)``,
``preds = torch.cat((preds, out))`` and meters' ``update``; whether the total outlives the
iteration that adds to it, reaches a backward (summing losses on purpose) or escapes the scope
(its caller may backpropagate it), the part of the added value that carries the graph, and a
record (``history.append({"loss": loss})``) whose graph-carrying values are kept."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.calls import AUTOGRAD_GRAD, backward_calls
from fixer.analysis.graph import GraphFacts
from fixer.analysis.graph_reuse import inside
from fixer.analysis.reported import TERMINAL_CALLS, TERMINAL_METHODS
from fixer.analysis.meters import container, is_meter
from fixer.analysis.names import dotted, qualified
from fixer.analysis.carried_flow import position
from fixer.analysis.retained_walks import returned_only_for_numbers
from fixer.analysis.scopes import Scope, enclosing_loops, nodes_of, scope_nodes
from fixer.analysis.threaded import persistent_argument, threaded_parameter
from fixer.context import FileContext
from fixer.nodes import subtree, walk
from fixer.analysis.vocabulary import SEQUENCE_ADDS


CONCATENATE = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.vstack", "torch.hstack", "torch.row_stack"})


CONCATENATE_NAMES = frozenset(name.split(".")[1] for name in CONCATENATE)


def logged_record(ctx: FileContext, scope: Scope, graph: GraphFacts, value: ast.expr, at: ast.stmt) -> Optional[ast.Dict]:
    """The dict literal appended (``history.append({"loss": loss})``), or the one a local name was
    given in the same iteration (``logs = {...}; history.append(logs)``) when nothing else reads
    the name."""
    if isinstance(value, ast.Dict):
        return value
    if not isinstance(value, ast.Name):
        return None
    defs = graph.assignments.get(value.id, [])
    if len(defs) != 1 or not isinstance(defs[0][1], ast.Dict):
        return None
    stmt, record = defs[0]
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    iteration = iteration_of(ctx, scope, at)  # a loop's pass, or a step function's call
    if iteration is not scope.node and not inside(ctx, stmt, iteration) or (stmt.lineno, stmt.col_offset) > (at.lineno, at.col_offset):
        return None
    reads = [n for n in scope_nodes(scope) if isinstance(n, ast.Name) and n.id == value.id and isinstance(n.ctx, ast.Load) and n is not value]
    return record if all(_returned_for_numbers(ctx, scope, n) for n in reads) else None


def _returned_for_numbers(ctx: FileContext, scope: Scope, name: ast.Name) -> bool:
    """``return ..., record`` that every caller drops or reads only for numbers."""
    parent = ctx.parent(name)
    returned = ctx.parent(parent) if isinstance(parent, ast.Tuple) else parent
    return isinstance(returned, ast.Return) and returned_only_for_numbers(ctx, scope, returned, name)


ACCUMULATING = frozenset({ast.AugAssign, ast.Assign, ast.Expr})  # the statements ``accumulation`` reads


def accumulation(node: ast.AST, graph: Optional[GraphFacts] = None) -> Optional[tuple[ast.stmt, str, ast.expr]]:
    """(statement, accumulator name, added value) for ``acc += v``, ``acc = acc + v``, ``acc = m * acc
    + (1 - m) * v``, ``acc.append(v)``."""
    if node.__class__ not in ACCUMULATING:
        return None  # (asked of every node of a scope: most are expressions)
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        target = node.target
        if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
            target = target.value  # metrics["loss"] += loss: the dict is the total's owner
        name = dotted(target)
        return (node, name, node.value) if name else None
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Add):
        target = node.targets[0]
        name = dotted(target) or (dotted(target.value) if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) else None)
        if not name:
            return None
        slot = ast.dump(target, annotate_fields=False).replace("Store", "Load")
        for own, other in ((node.value.left, node.value.right), (node.value.right, node.value.left)):
            if _reads_back(own, slot):
                return node, name, other
        return None
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and getattr(node.value.func, "attr", "") in CONCATENATE_NAMES:
        call, name = node.value, dotted(node.targets[0])  # preds = torch.cat((preds, output), 0)
        if name and len(node.targets) == 1 and dotted(call.func) in CONCATENATE and call.args and isinstance(call.args[0], (ast.Tuple, ast.List)):
            elements = call.args[0].elts
            if len(elements) == 2 and name in [dotted(e) for e in elements]:
                other = [e for e in elements if dotted(e) != name]
                return (node, name, other[0]) if len(other) == 1 else None
        return None
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        if isinstance(call.func, ast.Attribute) and call.func.attr in SEQUENCE_ADDS and len(call.args) == 1 and not call.keywords:
            base = call.func.value
            while isinstance(base, ast.Subscript):  # history["loss"].append(loss)
                base = base.value
            name = dotted(base)
            return (node, name, call.args[0]) if name else None
        if isinstance(call.func, ast.Attribute) and call.func.attr == "update" and call.args and is_meter(call.func.value, graph):
            name = dotted(container(call.func.value))  # AverageMeter.update(loss, n) keeps `self.sum += val * n`
            return (node, name, call.args[0]) if name else None
    return None


def _reads_back(expr: ast.expr, slot: str) -> bool:
    """``expr`` is what the target held before, maybe scaled: ``total``, ``0.9 * avg``,
    ``self.stats["loss"] * m``, ``avg / 2`` (a moving average is a running total that decays)."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):
        sides = (expr.left, expr.right) if isinstance(expr.op, ast.Mult) else (expr.left,)
        return any(ast.dump(side, annotate_fields=False) == slot for side in sides)
    return ast.dump(expr, annotate_fields=False) == slot


def is_meter_update(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and getattr(node.value.func, "attr", "") == "update"


def iteration_of(ctx: FileContext, scope: Scope, stmt: ast.stmt) -> ast.AST:
    """The innermost loop around ``stmt``, or the whole function for a ``self.`` total (one call = one step)."""
    loops = enclosing_loops(ctx, stmt, scope)
    return loops[0] if loops else scope.node


def outlives_iteration(ctx: FileContext, scope: Scope, graph: GraphFacts, stmt: ast.stmt, accumulator: str) -> bool:
    """The total is created outside the innermost loop (or is an attribute of ``self`` not reset
    earlier in the method, or a ``nonlocal``/``global`` variable of a function that backpropagates
    once per call), so it carries values from one iteration into the next."""
    loops = enclosing_loops(ctx, stmt, scope)
    own = [s for s, _ in graph.assignments.get(accumulator, []) if s is not stmt and not is_accumulation_of(s, accumulator)]
    if loops:
        if not any(s for s in own if inside(ctx, s, loops[0])):
            return True
        return False
    head = accumulator.split(".")[0]
    if scope.self_name and head == scope.self_name and "." in accumulator:
        return not any((s.lineno, s.col_offset) < (stmt.lineno, stmt.col_offset) for s in own)
    if "." not in accumulator and not any(position(s) < position(stmt) for s in own):
        if _declared_outside(scope, accumulator):
            return True  # ``nonlocal total`` in an optimizer's closure: each call adds to its caller's total
        if isinstance(stmt, ast.Expr) or isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Subscript):
            return persistent_argument(ctx, scope, accumulator)  # losses.append(loss) on the caller's list, the same each call
        return threaded_parameter(ctx, scope, accumulator)  # total, loss = step(x, total) in a loop
    return False


DECLARATIONS = frozenset({ast.Nonlocal, ast.Global})


def _declared_outside(scope: Scope, name: str) -> bool:
    """The scope declares ``name`` ``nonlocal`` or ``global``: a variable that outlives each call."""
    return any(name in n.names for n in nodes_of(scope, DECLARATIONS))


def is_accumulation_of(stmt: ast.AST, accumulator: str) -> bool:
    found = accumulation(stmt)
    return found is not None and found[1] == accumulator


def graph_part(graph: GraphFacts, value: ast.expr, at: ast.AST) -> Optional[ast.expr]:
    """The smallest sub-expression of ``value`` that carries the graph (``loss`` in ``loss * n``)."""
    if not graph.carries_graph(value, at):
        return None
    if any(graph.sometimes_detached(name, at) for name in dotted_names(value)):
        return None  # `if backward_now: loss.backward(); loss = loss.detach()`: handled on purpose
    while isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        left, right = graph.carries_graph(value.left, at), graph.carries_graph(value.right, at)
        if left == right:
            break
        value = value.left if left else value.right
    return value


def dotted_names(expr: ast.AST) -> set[str]:
    return {name for node in subtree(expr) if (name := dotted(node))}


def reaches_backward(ctx: FileContext, scope: Scope, graph: GraphFacts, accumulator: str) -> bool:
    """True if the total (or anything computed from it) is backpropagated: summing losses on purpose."""
    backwarded = ctx.memo(("backwarded_names", id(scope.node)), lambda: {n for c in backward_calls(ctx, scope) for n in dotted_names(c.target)})
    return bool(backwarded & _derived(graph, accumulator))  # the names found once a scope, not once a total


def _derived(graph: GraphFacts, accumulator: str) -> set[str]:
    """The total and every name computed from it (``for old in memory`` takes its elements)."""
    users = graph.ctx.memo(("derived_users", id(graph.scope.node)), lambda: _users(graph))  # once a scope, not a total
    derived, todo = {accumulator}, [accumulator]
    while todo:
        for name in users.get(todo.pop(), set()) - derived:
            derived.add(name)
            todo.append(name)
    return derived


def _users(graph: GraphFacts) -> dict[str, set[str]]:
    """For each name, the names of the scope given a value computed from it."""
    users: dict[str, set[str]] = {}
    for name, defs in graph.assignments.items():
        for stmt, value in defs:
            source = stmt.iter if isinstance(stmt, (ast.For, ast.AsyncFor)) and value is None else value
            for used in dotted_names(source) if source is not None else ():
                users.setdefault(used, set()).add(name)
    return users


def escapes(ctx: FileContext, scope: Scope, graph: GraphFacts, accumulator: str) -> bool:
    """The total (or a name computed from it) is returned, stored on an object or passed to a call
    other than a report: its caller may backpropagate it."""
    return bool(_derived(graph, accumulator) & ctx.memo(("escaping_names", id(scope.node)), lambda: _escaping_names(scope)))


LEAVING = frozenset({ast.Return, ast.Assign, ast.Call})  # what ``_escaping_names`` reads


def _escaping_names(scope: Scope) -> set[str]:
    """The names whose values leave the scope: returned, stored on an object, passed to a call."""
    names: set[str] = set()
    for node in nodes_of(scope, LEAVING):
        if isinstance(node, ast.Return) and node.value is not None:
            names |= dotted_names(node.value)
        if isinstance(node, ast.Assign) and any(not isinstance(t, ast.Name) for t in node.targets):
            names |= dotted_names(node.value)
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in TERMINAL_CALLS):
            if getattr(node.func, "attr", None) not in TERMINAL_METHODS:
                names.update(name for a in node.args if (name := dotted(a)))
    return names


def differentiable_gradient(ctx: FileContext, graph: GraphFacts, value: ast.expr, at: ast.AST, depth: int = 3) -> bool:
    """``value`` holds a gradient taken with ``create_graph=True`` (directly or through local names)."""
    for node in walk(value):
        if isinstance(node, ast.Call) and qualified(ctx, node.func) in AUTOGRAD_GRAD:
            flag = next((k.value for k in node.keywords if k.arg == "create_graph"), None)
            if flag is not None and not (isinstance(flag, ast.Constant) and not flag.value):
                return True
        if depth and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if any(v is not None and differentiable_gradient(ctx, graph, v, s, depth - 1) for s, v in graph.reaching(node.id, at)):
                return True
    return False
