"""Project functions and methods that backpropagate their argument: what one call of them does.

``linear_backward(callee, call, p)`` is a summary of the callee for the arguments of one call:
true when, on this call, the callee does nothing but one freeing backward pass of a
linear image of ``p`` (``(loss.float() * self.loss_scale).backward()``), with every ``if`` on its
path decided by a constant the call passes (``update_master_grads=False``) or a default. Then a
call with ``a + b`` computes the gradients that a call with ``a`` and then one with ``b`` would
(the image of a sum is the sum of the images), walking a shared graph once. Anything else the
callee does on that path (reading ``.grad``, a step, an unknown call, a branch on a value) makes it
false: merging calls is then not proven.

``merged_calls(ctx, scope, first, second)``: the two arguments to sum when two step calls
(``training_calls``) of one such callee on one receiver differ only in that argument and nothing
between them touches gradients or rebinds what they read; each may sit alone under a shared guard
of one test (passes.guarded_unit), which runs both or neither.

``backward_wrapper_argument(ctx, scope, call)``: the argument of a call of a function whose whole
body is ``parameter.backward()``."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.callees import called_function
from fixer.analysis.calls import BackwardCall, backward_call
from fixer.analysis.gradient_effects import Effect, gradient_effect
from fixer.analysis.graph import facts
from fixer.analysis.held_values import held_receiver
from fixer.analysis.names import dotted
from fixer.analysis.passes import guarded_unit, same_guard
from fixer.analysis.scopes import Scope, enclosing_block
from fixer.analysis.statement_moves import is_docstring
from fixer.context import FileContext
from fixer.nodes import walk

LINEAR_METHODS = frozenset({"float", "double", "half", "to", "contiguous", "clone"})  # f(a + b) == f(a) + f(b)


def merged_calls(ctx: FileContext, scope: Scope, first: BackwardCall, second: BackwardCall) -> Optional[tuple[ast.expr, ast.expr]]:
    """(argument of ``first``, argument of ``second``) whose sum one call of the callee takes in place of both."""
    if first.kind != "call" or second.kind != "call" or ctx.text(first.node.func) != ctx.text(second.node.func):
        return None
    stmts = [ctx.statement_of(c.node) for c in (first, second)]
    if not all(isinstance(s, ast.Expr) and ctx.is_own_line(s) for s in stmts) or stmts[0] is stmts[1]:
        return None
    stmts = [guarded_unit(ctx, s) for s in stmts]  # ``if c: f(a)``, ``if c: f(b)`` under one shared test
    block = enclosing_block(ctx, stmts[0])
    if block is None or not any(s is stmts[1] for s in block) or not same_guard(ctx, *stmts):
        return None
    callee = called_function(ctx, scope, held_receiver(ctx, scope, first.node.func))
    if callee is None or called_function(ctx, scope, held_receiver(ctx, scope, second.node.func)) is not callee:
        return None
    one, two = _bound(callee, first.node), _bound(callee, second.node)
    differing = [k for k in one or {} if two is not None and ast.dump(one[k]) != ast.dump(two[k])]  # (a default is the callee file's node)
    if len(differing) != 1 or not all(linear_backward(callee, c.node, differing[0]) for c in (first, second)):
        return None  # the calls differ in more than one argument, or the callee does more with it
    parameter = differing[0]
    ids = [id(s) for s in block]
    between = block[ids.index(id(stmts[0])) + 1 : ids.index(id(stmts[1]))]
    if gradient_effect(ctx, scope, between) != Effect.NONE or not _same_values(ctx, scope, second.node, first.node):
        return None
    return one[parameter], two[parameter]


def linear_backward(callee: Scope, call: ast.Call, parameter: str) -> bool:
    """On this call, the callee only backpropagates a linear image of ``parameter``."""
    ctx = callee.ctx
    if ctx is None or isinstance(callee.node, ast.Module) or callee.node.decorator_list:
        return False
    values = _bound(callee, call)
    body = _taken(callee.node.body, values) if values is not None else None
    return body is not None and parameter in values and _backpropagates(ctx, body, parameter) == parameter


def _backpropagates(ctx: FileContext, body: list[ast.stmt], parameter: str) -> Optional[str]:
    """``parameter`` when ``body`` only builds linear images of it and backpropagates one of them."""
    derived = {parameter: parameter}  # local name -> the parameter it is a linear image of
    backpropagated = None
    for stmt in body:
        if is_docstring(stmt):
            continue
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            source = _linear(stmt.value, derived)
            if source is None:
                return None
            derived[stmt.targets[0].id] = source
            continue
        inner = backward_call(ctx, stmt.value) if isinstance(stmt, ast.Expr) else None
        if inner is None or inner.kind != "method" or inner.node.args or inner.node.keywords or backpropagated is not None:
            return None
        backpropagated = _linear(inner.target, derived)
        if backpropagated is None:
            return None
    return backpropagated


def _linear(expr: ast.expr, derived: dict[str, str]) -> Optional[str]:
    """The one parameter ``expr`` is a linear image of (products with and quotients by values that
    do not derive from a parameter, sums of images of it, sign, dtype/device moves), or None."""
    if isinstance(expr, ast.Name):
        return derived.get(expr.id)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return _linear(expr.operand, derived)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        left, right = _linear(expr.left, derived), _linear(expr.right, derived)
        return left if left is not None and left == right else None
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Div)):
        left = _linear(expr.left, derived)
        if left is not None and _coefficient(expr.right, derived):
            return left
        right = _linear(expr.right, derived) if isinstance(expr.op, ast.Mult) else None
        return right if right is not None and _coefficient(expr.left, derived) else None
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in LINEAR_METHODS:
        arguments = [*expr.args, *(k.value for k in expr.keywords)]
        return _linear(expr.func.value, derived) if all(_coefficient(a, derived) for a in arguments) else None
    return None


def _coefficient(expr: ast.expr, derived: dict[str, str]) -> bool:
    """A value the same on both calls: constants and attributes, no name holding a parameter's image."""
    return all(isinstance(n, (ast.Constant, ast.Attribute, ast.Name)) for n in walk(expr)) and not any(
        isinstance(n, ast.Name) and n.id in derived for n in walk(expr)
    )


def _taken(body: list[ast.stmt], values: dict[str, ast.expr]) -> Optional[list[ast.stmt]]:
    """The statements that run on this call: an ``if`` must be decided by a constant parameter."""
    taken: list[ast.stmt] = []
    for stmt in body:
        if not isinstance(stmt, ast.If):
            taken.append(stmt)
            continue
        test, negated = stmt.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        value = values.get(test.id) if isinstance(test, ast.Name) else None
        if not isinstance(value, ast.Constant):
            return None
        branch = _taken(stmt.body if bool(value.value) != negated else stmt.orelse, values)
        if branch is None:
            return None
        taken += branch
    return taken


def _bound(callee: Scope, call: ast.Call) -> Optional[dict[str, ast.expr]]:
    """Parameter -> the argument the call passes, or its default; None when not every parameter
    is known (``*args``, ``**kwargs``, a missing argument)."""
    args = callee.node.args
    positional = args.posonlyargs + args.args
    if callee.self_name is not None and isinstance(call.func, ast.Attribute):
        positional = positional[1:]
    if args.vararg or args.kwarg or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    bound: dict[str, ast.expr] = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults) :]], args.defaults))
    bound.update((a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)
    if len(call.args) > len(positional):
        return None
    bound.update(zip([a.arg for a in positional], call.args))
    names = {a.arg for a in positional + args.kwonlyargs}
    for keyword in call.keywords:
        if keyword.arg not in names:
            return None
        bound[keyword.arg] = keyword.value
    return bound if set(bound) == names else None


def _same_values(ctx: FileContext, scope: Scope, node: ast.AST, at: ast.AST) -> bool:
    """Every name ``node`` reads means at ``at`` what it means where ``node`` is."""
    graph = facts(ctx, scope)
    for name in {n for n in (dotted(m) for m in walk(node) if isinstance(m, (ast.Name, ast.Attribute))) if n}:
        here, there = graph.reaching(name, at), graph.reaching(name, node)
        if [id(s) for s, _ in here] != [id(s) for s, _ in there] or any(_after(s, at) for s, _ in here):
            return False
    return True


def _after(node: ast.AST, at: ast.AST) -> bool:
    return (node.lineno, node.col_offset) > (at.lineno, at.col_offset)


def backward_wrapper_argument(ctx: FileContext, scope: Scope, call: BackwardCall) -> Optional[ast.Name]:
    """The argument ``call`` passes, as a plain name, for the parameter of a function of the
    project whose body (past its docstring) is only ``parameter.backward()``."""
    if call.kind != "call" or call.node.keywords or any(isinstance(a, ast.Starred) for a in call.node.args):
        return None
    callee = called_function(ctx, scope, call.node.func)
    if callee is None or not isinstance(callee.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or callee.node.decorator_list:
        return None
    body = [s for s in callee.node.body if not is_docstring(s)]
    inner = backward_call(callee.ctx or ctx, body[0].value) if len(body) == 1 and isinstance(body[0], ast.Expr) else None
    if inner is None or inner.kind != "method" or inner.node.args or inner.node.keywords or not isinstance(inner.target, ast.Name):
        return None
    params = [a.arg for a in callee.node.args.posonlyargs + callee.node.args.args]
    params = params[1:] if callee.self_name else params
    if params.count(inner.target.id) != 1 or len(call.node.args) != len(params) or callee.node.args.kwonlyargs:
        return None
    argument = call.node.args[params.index(inner.target.id)]
    return argument if isinstance(argument, ast.Name) else None
