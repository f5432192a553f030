"""Whether a running total is a number or a one-element tensor: a total that starts as a Python
number and is never used as a tensor (in each caller, for a total threaded through a step
function), and a value that is a one-element tensor by construction (a loss backpropagated with
a bare ``backward()``, ``x.mean()``, a project function returning one). GF301 accumulates
``.item()`` for those and ``.detach()`` otherwise."""

from __future__ import annotations

import ast

from fixer.analysis.accumulations import is_accumulation_of
from fixer.analysis.calls import backward_calls
from fixer.analysis.graph import GraphFacts, facts
from fixer.analysis.names import dotted, qualified
from fixer.analysis.callees import called_function
from fixer.analysis.scopes import RETURNS, Scope, nodes_of, scope_nodes
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.call_sites import argument_of, parameter_position
from fixer.analysis.threaded import threaded_parameter
from fixer.context import FileContext


def scalar_loss(ctx: FileContext, scope: Scope, part: ast.expr) -> bool:
    """The value is a name backpropagated with a bare ``.backward()`` (or ``scaler.scale(x).backward()``,
    ``accelerator.backward(x)``): it is a one-element tensor."""
    name = dotted(part)
    return bool(name) and any(
        call.target_name == name and (call.kind in ("scaler", "owner") or call.kind == "method" and not call.node.args)
        for call in backward_calls(ctx, scope)
    )


FULL_REDUCTIONS = frozenset({"mean", "sum", "prod", "norm", "std", "var", "max", "min"})


def full_reduction(ctx: FileContext, scope: Scope, graph: GraphFacts, value: ast.expr, at: ast.AST, depth: int = 2) -> bool:
    """``value`` is a one-element tensor by construction: ``x.mean()`` (no dimension), a name (or a
    field of ``self``) bound only to such values, or a call of a function of this project whose every return is one."""
    if isinstance(value, (ast.Name, ast.Attribute)) and dotted(value):  # ``mae``, ``self.mae``
        defs = graph.reaching(dotted(value), at)
        return bool(defs) and depth > 0 and all(v is not None and full_reduction(ctx, scope, graph, v, s, depth - 1) for s, v in defs)
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr in FULL_REDUCTIONS and not value.args and not value.keywords:
        return True
    callee = called_function(ctx, scope, func)
    if callee is None or depth <= 0:
        return False
    returns = [n.value for n in nodes_of(callee, RETURNS) if isinstance(n, ast.Return)]
    inner = facts(callee.ctx or ctx, callee)
    return bool(returns) and all(
        v is not None and full_reduction(callee.ctx or ctx, callee, inner, v, v, depth - 1) for v in returns
    )


def _numeric_in_callers(ctx: FileContext, scope: Scope, parameter: str, depth: int) -> bool:
    """Every call site passes, for ``parameter``, a name its caller starts as a number and uses
    only as one (the call binding the result back to it is the accumulation there)."""
    position = parameter_position(scope, parameter)
    sites = list(project_call_sites(ctx, scope)) if position is not None else []
    for own, caller, call in sites:
        argument = argument_of(call, parameter, position) if call is not None else None
        if caller is scope or not isinstance(argument, ast.Name):
            return False
        if not numeric_use(own, caller, facts(own, caller), argument.id, own.statement_of(call), depth - 1):
            return False
    return bool(sites)


def numeric_use(ctx: FileContext, scope: Scope, graph: GraphFacts, accumulator: str, accumulation: ast.AST, depth: int = 2) -> bool:
    """The total starts as a Python number (or empty list) and is never used as a tensor. A total
    threaded through a step function (``total, loss = step(x, total)``) is judged in each caller."""
    initial = [v for s, v in graph.assignments.get(accumulator, []) if s is not accumulation and not is_accumulation_of(s, accumulator)]
    if not initial and "." not in accumulator and depth > 0 and threaded_parameter(ctx, scope, accumulator):
        return _numeric_in_callers(ctx, scope, accumulator, depth)
    if not initial:
        return False  # e.g. self.total set in another method: type unknown
    for value in initial:
        if not (isinstance(value, ast.Constant) and isinstance(value.value, (int, float)) or isinstance(value, ast.List) and not value.elts):
            return False
    return accumulator not in ctx.memo(("used_as_tensors", id(scope.node)), lambda: _used_as_tensors(ctx, scope))


def _used_as_tensors(ctx: FileContext, scope: Scope) -> set[str]:
    """The names the scope uses as tensors (found once a scope, not once a total)."""
    used: set[str] = set()
    for node in scope_nodes(scope):
        if isinstance(node, ast.Attribute) and node.attr != "append":
            used.add(dotted(node.value))  # total.item(), total.cpu(), ...
        if isinstance(node, ast.Subscript) and isinstance(ctx.parent(node), ast.Attribute):
            used.add(dotted(node.value))  # losses[-1].item()
        if isinstance(node, ast.Call) and (qualified(ctx, node.func) or "").startswith("torch."):
            used.update(dotted(arg) for arg in node.args)  # torch.stack(losses)
    return used
