"""Graphs built once before a loop (GF102's query): a name the loop reads, bound by one
assignment before it whose value carries a graph with saved tensors from tensors that surely
require grad (``built_before``); whether the loop updates that graph's leaves (an optimizer
step, an in-place update); and whether recomputing the value in the loop is "pure" (torch
operations and tensor methods only), "module" (module or pure helper calls, worth it only when
the leaves change) or would change what the expression means (``recompute_kind``)."""

from __future__ import annotations

import ast
import re
from typing import Iterator, Optional

from fixer.analysis.call_events import resolved_callee
from fixer.analysis.calls import backward_calls, optimizer_calls
from fixer.analysis.bindings import module_names
from fixer.analysis.earlier_in_pass import runs_before_once
from fixer.analysis.trainable_inputs import requires_grad_surely
from fixer.analysis.evidence import built_graph
from fixer.analysis.held_values import held_name
from fixer.analysis.graph import GraphFacts, Kind, facts
from fixer.analysis.statement_moves import is_docstring
from fixer.analysis.graph_reuse import assigned_names, inside, names_in
from fixer.analysis.names import qualified
from fixer.analysis.callees import called_function
from fixer.analysis.scopes import Scope, scope_nodes, walk_local
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.shared_graph import saves_tensors
from fixer.analysis.training_calls import steps_optimizer, training_calls
from fixer.context import FileContext
from fixer.nodes import walk


MAX_PURE_DEPTH = 3  # project functions calling pure project functions, read this deep
RANDOM = re.compile(r"(^|\.)(rand\w*|bernoulli|multinomial|normal|poisson|\w*dropout\w*|rrelu|gumbel_softmax|manual_seed|save|load|empty\w*)$")


PURE_TENSOR_METHODS = frozenset(
    {"matmul", "mm", "bmm", "mv", "dot", "mul", "div", "add", "sub", "pow", "exp", "log", "tanh", "sigmoid", "relu",
     "softmax", "log_softmax", "sum", "mean", "view", "view_as", "reshape", "t", "transpose", "permute", "squeeze",
     "unsqueeze", "expand", "expand_as", "flatten", "clone", "contiguous", "double", "float", "half", "to", "abs",
     "sqrt", "norm", "clamp", "sin", "cos", "repeat", "narrow", "gather", "index_select", "masked_fill", "neg"}
)


def saving_from_trainable(scope: Scope, stmt: ast.Assign) -> bool:
    ctx = scope.ctx
    graph = facts(ctx, scope)
    return saves_tensors(ctx, scope, stmt.value) and requires_grad_surely(ctx, graph, stmt.value, stmt, 3)


def body_nodes(ctx: FileContext, loop: ast.AST) -> list[ast.AST]:
    return ctx.memo(("loop_body_nodes", id(loop)), lambda: list(walk_local(loop.body, ctx=ctx)))


def _assigned_in(ctx: FileContext, loop: ast.AST) -> set[str]:
    names = set(assigned_names(loop))
    for node in body_nodes(ctx, loop):
        names.update(assigned_names(node))
        if isinstance(node, ast.Delete):
            names.update(names_in(node))
    return names


def built_before(ctx: FileContext, scope: Scope, graph: GraphFacts, loop: ast.AST, body: list[ast.AST]) -> Iterator[tuple[str, ast.Assign]]:
    """(name, assignment) for names read in the loop, bound only by one assignment before it whose
    value carries a graph with saved tensors from tensors that surely require grad."""
    assigned = _assigned_in(ctx, loop)
    read = {n.id for n in body if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    read |= {held.id for n in body if isinstance(n, (ast.Subscript, ast.Attribute)) and (held := held_name(ctx, scope, n)) is not None}
    read -= assigned  # (``out["loss"]`` after ``out = {"loss": loss}`` reads ``loss``)
    for name in sorted(read):
        if any(not hasattr(stmt, "lineno") for stmt, _ in graph.assignments.get(name, [])):
            continue  # `with ... as name`: GraphFacts.reaching cannot order a withitem
        defs = graph.reaching(name, loop)
        if len(defs) != 1:
            continue
        stmt, value = defs[0]
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        if (stmt.lineno, stmt.col_offset) >= (loop.lineno, loop.col_offset):
            continue
        if not inside(ctx, loop, ctx.parent(stmt)) and not runs_before_once(ctx, stmt, loop):
            continue  # (in the last pass of an earlier loop, say: built once before this one)
        proven = built_graph(ctx, stmt)  # graphfix run saw this graph freed and needed again
        if under_no_grad(ctx, stmt) or graph.kind(value, stmt) != Kind.GRAPH or not (proven or saves_tensors(ctx, scope, value)):
            continue
        if proven or requires_grad_surely(ctx, graph, value, stmt, 3):
            yield name, stmt


def recompute_kind(ctx: FileContext, graph: GraphFacts, scope: Scope, stmt: ast.Assign, loop: ast.AST) -> Optional[str]:
    """"pure" for tensor ops only, "module" for module calls when the loop updates the leaves,
    None when recomputing could change what the expression means."""
    value = stmt.value
    if not _inputs_stable(ctx, graph, scope, value, stmt, loop):
        return None
    kind = "pure"
    for node in walk(value):
        if isinstance(node, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Lambda)) or isinstance(node, ast.comprehension):
            return None
        if not isinstance(node, ast.Call):
            continue
        name = qualified(ctx, node.func) or ""
        if name.startswith("torch.") and not RANDOM.search(name) and not name.endswith("_"):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr in PURE_TENSOR_METHODS and graph.kind(node.func.value, stmt) >= Kind.LEAF:
            continue
        if graph.is_module(node.func) and ctx.text(node.func) in module_names(ctx) or _pure_helper(ctx, scope, node):
            kind = "module"
            continue
        return None
    if kind == "module" and not updates_leaves(ctx, graph, scope, value, loop):
        return None
    return kind


def _pure_helper(ctx: FileContext, scope: Scope, call: ast.Call, depth: int = MAX_PURE_DEPTH) -> bool:
    """``call`` runs a project function (of this file or imported) whose body only returns an
    expression of torch operations, tensor methods, calls of its own parameters and calls of such
    functions (``return criterion(out, y) + 0.01 * out.pow(2).mean()``; ``return
    regression_loss(criterion, out, y)``), ``depth`` calls deep: evaluating it again has no effect
    but a new graph."""
    callee = called_function(ctx, scope, call.func) if depth > 0 else None
    if callee is None or not isinstance(callee.node, ast.FunctionDef) or callee.class_node is not None or callee.node.decorator_list:
        return False
    body = [s for s in callee.node.body if not is_docstring(s)]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].value is None:
        return False
    args = callee.node.args
    params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    own = callee.ctx or ctx
    for node in walk(body[0].value):
        if isinstance(node, (ast.NamedExpr, ast.Await, ast.Lambda, ast.comprehension)):
            return False
        if isinstance(node, ast.Call):
            name = qualified(own, node.func) or ""
            torch_op = name.startswith("torch.") and not RANDOM.search(name) and not name.endswith("_")
            tensor_method = isinstance(node.func, ast.Attribute) and node.func.attr in PURE_TENSOR_METHODS
            if not (torch_op or tensor_method or isinstance(node.func, ast.Name) and node.func.id in params) and not (
                isinstance(node.func, ast.Name) and _pure_helper(own, callee, node, depth - 1)
            ):
                return False
    return True


def _inputs_stable(ctx: FileContext, graph: GraphFacts, scope: Scope, value: ast.expr, stmt: ast.AST, loop: ast.AST) -> bool:
    """No input of ``value`` is rebound between ``stmt`` and the loop or inside the loop (updating a
    tensor in place, ``a -= lr * a.grad``, is not rebinding)."""
    inputs = names_in(value)
    start, end = (stmt.end_lineno, stmt.end_col_offset), (loop.end_lineno, loop.end_col_offset)
    for node in scope_nodes(scope):
        bound = set(assigned_names(node)) & inputs
        if not bound or not hasattr(node, "lineno") or not (start <= (node.lineno, node.col_offset) <= end):
            continue
        if isinstance(node, ast.AugAssign) and inside(ctx, node, loop) and graph.kind(node.target, node) >= Kind.LEAF:
            continue
        return False
    return True


def updates_leaves(ctx: FileContext, graph: GraphFacts, scope: Scope, value: ast.expr, loop: ast.AST) -> bool:
    """The loop steps an optimizer or updates an input of ``value`` in place."""
    if any(call.kind == "step" and inside(ctx, call.node, loop) for call in optimizer_calls(ctx, scope)):
        return True
    if any(inside(ctx, call.node, loop) and steps_optimizer(ctx, scope, call) for call in training_calls(ctx, scope)):
        return True
    inputs = names_in(value)
    for node in body_nodes(ctx, loop):
        if isinstance(node, ast.AugAssign) and names_in(node.target) & inputs:
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_"):
            if names_in(node.func.value) & inputs and node.func.attr != "requires_grad_":
                return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "data" and names_in(t) & inputs for t in node.targets):
            return True
    return False


def walked_after_loop(ctx: FileContext, scope: Scope, name: str, loop: ast.AST) -> bool:
    """After the loop, ``name`` reaches a backward: a backward call of the scope reads it, or it is
    handed to a function or method of the project that backpropagates (``generator_step(fake)``).
    Recomputed in the loop, the name then holds the last pass's value, whose graph that pass's
    backward freed: the later backward would still fail (a GAN's fake: GF103's detach is the fix)."""
    end = loop.end_lineno or loop.lineno
    backwards = {id(c.node) for c in backward_calls(ctx, scope)}
    for node in scope_nodes(scope):
        if not (isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load) and node.lineno > end):
            continue
        for parent in ctx.ancestors(node):
            if parent is scope.node or isinstance(parent, ast.stmt) and not isinstance(parent, ast.Expr | ast.Assign):
                break
            if isinstance(parent, ast.Call):
                if id(parent) in backwards:
                    return True
                callee = resolved_callee(ctx, scope, parent)
                if callee is not None and backward_calls(callee.ctx or ctx, callee):
                    return True
    return False
