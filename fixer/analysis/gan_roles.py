"""Roles in a pair of training steps: which module made a tensor's graph, and which optimizer
trains the modules on each side.

``producers(ctx, graph, expr, at)`` names the modules whose forward pass built the graph ``expr``
carries: ``G(z)``, ``G(z).view(n, -1)``, ``torch.tanh(G(z))``, a name assigned from one of them,
``self.G.decode(z)``. Data has none: a batch from a loader, ``torch.randn(...)``,
``obs.to(device)`` (a tensor method keeps its receiver's kind), and so has anything opaque:
``replay_buffer.sample()``, ``Variable(Tensor(np...))``, a helper of another module. The answer
is positive evidence only; an empty set means "not known to carry a module's graph".

``roles_hold`` asks the question GAN-step rules need answered before they speak: the tensor is
made by a module that the generator step's optimizer trains and the discriminator step's does
not, and the callable applied to it is a module the discriminator step's optimizer trains and the
generator step's does not. An optimizer whose parameters are not visible answers no.
"""

from __future__ import annotations

import ast
from typing import Iterable, Optional

from fixer.analysis.callees import called_function
from fixer.analysis.graph import CREATION, DETACHING_ATTRIBUTES, DETACHING_METHODS, PARAMETER, GraphFacts, facts
from fixer.analysis.names import dotted, qualified
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.protocol import optimizer_params
from fixer.analysis.scopes import RETURNS, is_self_attribute, nodes_of
from fixer.analysis.shared_graph import ZERO_GRADIENT_METHODS, reaching
from fixer.analysis.slots import slot_name
from fixer.context import FileContext

MAX_DEPTH = 4  # names followed back through their assignments


def producers(ctx: FileContext, graph: GraphFacts, expr: Optional[ast.expr], at: ast.AST, depth: int = MAX_DEPTH) -> frozenset[str]:
    """The modules (dotted names) whose forward pass built the graph ``expr`` carries at ``at``."""
    if expr is None or depth < 0:
        return frozenset()
    if isinstance(expr, ast.Call):
        return _call_producers(ctx, graph, expr, at, depth)
    if isinstance(expr, (ast.Name, ast.Attribute)):
        if isinstance(expr, ast.Attribute) and expr.attr in DETACHING_ATTRIBUTES and not is_self_attribute(ctx, expr):
            return frozenset()
        name = dotted(expr)
        if name is None:
            return producers(ctx, graph, expr.value, at, depth) if isinstance(expr, ast.Attribute) else frozenset()
        found: set[str] = set()
        for stmt, value in reaching(graph, name, at):
            if value is not None and not under_no_grad(ctx, stmt):
                found |= producers(ctx, graph, value, stmt, depth - 1)
        return frozenset(found)
    if isinstance(expr, ast.UnaryOp):
        return frozenset() if isinstance(expr.op, ast.Not) else producers(ctx, graph, expr.operand, at, depth)
    if isinstance(expr, ast.Subscript):
        index = expr.slice.value if isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, int) else None
        returned = _returned_producers(ctx, graph, expr.value, index, depth) if index is not None else None
        return returned if returned is not None else producers(ctx, graph, expr.value, at, depth)
    if isinstance(expr, (ast.Starred, ast.NamedExpr)):
        return producers(ctx, graph, expr.value, at, depth)
    if isinstance(expr, ast.BinOp):
        return _union(ctx, graph, (expr.left, expr.right), at, depth)
    if isinstance(expr, ast.IfExp):
        return _union(ctx, graph, (expr.body, expr.orelse), at, depth)
    if isinstance(expr, (ast.Tuple, ast.List)):
        return _union(ctx, graph, expr.elts, at, depth)
    return frozenset()  # constants, comparisons, comprehensions, lambdas: no module's graph


def _call_producers(ctx: FileContext, graph: GraphFacts, call: ast.Call, at: ast.AST, depth: int) -> frozenset[str]:
    func = call.func
    if under_no_grad(ctx, call):
        return frozenset()
    if isinstance(func, ast.Attribute) and (func.attr in DETACHING_METHODS or func.attr in ZERO_GRADIENT_METHODS):
        return frozenset()
    inputs = [*call.args, *(k.value for k in call.keywords)]
    name = slot_name(func)
    if name and _is_module(ctx, graph, func):
        return frozenset({name}) | _union(ctx, graph, inputs, at, depth)  # its inputs' graphs flow on
    if isinstance(func, ast.Attribute) and name and _is_module(ctx, graph, func.value):
        return frozenset({dotted(func.value)}) | _union(ctx, graph, inputs, at, depth)  # ``G.decode(z)``
    qualified_name = qualified(ctx, func) or ""
    if CREATION.match(qualified_name) or qualified_name in PARAMETER:
        return frozenset()  # a new tensor: data, or a leaf no module made
    if qualified_name.startswith("torch."):
        return _union(ctx, graph, inputs, at, depth)  # ``torch.cat([G(z), x])``
    returned = _returned_producers(ctx, graph, call, None, depth)
    if returned is not None:
        return returned
    if isinstance(func, ast.Attribute):
        receiver = producers(ctx, graph, func.value, at, depth)  # a tensor method keeps its receiver's kind
        return receiver | _union(ctx, graph, inputs, at, depth) if receiver else frozenset()
    return frozenset()  # a function we cannot see into: unknown, so no evidence


def _returned_producers(ctx: FileContext, graph: GraphFacts, call: ast.expr, index: Optional[int], depth: int) -> Optional[frozenset[str]]:
    """The modules that built what a method of the caller's own class returns (element ``index`` of
    its tuples), named as the caller names them (``fake, loss = self.d_step(real)`` with ``d_step``
    returning ``self.G(z)``'s value); None when the call is no such method."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute) or dotted(call.func.value) != graph.scope.self_name:
        return None
    method = called_function(ctx, graph.scope, call.func, imported=False)
    if method is None or method.class_node is not graph.scope.class_node or not method.self_name or method.node is graph.scope.node:
        return None
    inner = facts(ctx, method)
    found: set[str] = set()
    for ret in (n for n in nodes_of(method, RETURNS) if isinstance(n, ast.Return) and n.value is not None):
        value = ret.value
        if index is not None:
            if not isinstance(value, ast.Tuple) or index >= len(value.elts):
                return None
            value = value.elts[index]
        own = producers(ctx, inner, value, ret, depth - 1)
        found |= {graph.scope.self_name + m[len(method.self_name):] for m in own if m.startswith(method.self_name + ".")}
    return frozenset(found)


def _is_module(ctx: FileContext, graph: GraphFacts, func: ast.expr) -> bool:
    """A module by its construction or name (``GraphFacts.is_module``), or because an optimizer
    of the file is built from its ``.parameters()``."""
    name = slot_name(func)  # also nets["G"], a slot an optimizer's parameters name
    return graph.is_module(func) or any(name in models for models in optimizer_params(ctx).values() if models)


def _union(ctx: FileContext, graph: GraphFacts, exprs: Iterable[ast.expr], at: ast.AST, depth: int) -> frozenset[str]:
    found: set[str] = set()
    for expr in exprs:
        found |= producers(ctx, graph, expr, at, depth)
    return frozenset(found)


def roles_hold(ctx: FileContext, callee: str, made_by: frozenset[str], discriminator_opt: str, generator_opt: str) -> bool:
    """``made_by`` (the fake's producers) includes a module ``generator_opt`` trains and none that
    ``discriminator_opt`` trains; ``callee`` is a module ``discriminator_opt`` trains and
    ``generator_opt`` does not. False whenever either optimizer's parameters are not known."""
    if not made_by or not discriminates(ctx, callee, discriminator_opt, generator_opt):
        return False
    owners = optimizer_params(ctx)
    trained_d, trained_g = owners[discriminator_opt], owners[generator_opt]
    return any(trains(trained_g, module) for module in made_by) and not any(trains(trained_d, module) for module in made_by)


def discriminates(ctx: FileContext, callee: str, discriminator_opt: str, generator_opt: str) -> bool:
    """The cheap half of ``roles_hold``: both optimizers' parameters are known, and ``callee`` is
    trained by the first and not by the second."""
    owners = optimizer_params(ctx)
    trained_d, trained_g = owners.get(discriminator_opt), owners.get(generator_opt)
    return bool(trained_d) and bool(trained_g) and trains(trained_d, callee) and not trains(trained_g, callee)


def trains(models: frozenset[str], module: str) -> bool:
    """One of the optimizer's ``models`` is ``module``, contains it or is contained in it."""
    return any(module == m or module.startswith(m + ".") or m.startswith(module + ".") for m in models)
