"""``create_graph`` decided by a helper's caller: the helper passes one of its parameters on as the
flag (``def input_gradients(critic, x, create_graph=False): ... autograd.grad(...,
create_graph=create_graph)``), directly or through other helpers that pass their own parameter on
(``def gradient_penalty(critic, real, fake, create_graph=False): grads = input_gradients(...,
create_graph=create_graph)``), and returns the gradients (or what it computes from them).

``forwarded_flag(ctx, helper)`` is that parameter (None: the helper decides the flag itself, or
does not return its gradients). A call that gives it ``False`` or nothing (a default of ``False``
or ``None``) gets constant gradients: ``flag_off(helper, call)``. Helpers are followed through the
project's one callee answer, this deep; a parameter the helper rebinds decides nothing."""

from __future__ import annotations

import ast
import re
from typing import Iterator, Optional

from fixer.analysis.arguments import bound_arguments, parameter_default, parameters
from fixer.analysis.callees import called_function
from fixer.analysis.calls import backward_calls
from fixer.analysis.gradient_consumers import returns_gradients
from fixer.analysis.bindings import imported_names
from fixer.analysis.imported_definitions import imported_module_matches
from fixer.analysis.names import dotted
from fixer.analysis.scopes import CALLS, Scope, nodes_of, scope_nodes
from fixer.context import FileContext

MAX_DEPTH = 3  # helpers passing the flag on, followed this deep
FORWARDED = rb"create_graph\s*=\s*(?!True\b|False\b|None\b)[A-Za-z_]"  # the flag given a name, not a constant
CREATE_GRAPH, CREATE_GRAPH_TEXT = re.compile(FORWARDED), re.compile(FORWARDED.decode())


def flag_calls(ctx: FileContext, scope: Scope) -> Iterator[tuple[ast.Call, str, ast.expr]]:
    """(call, the helper's flag, what the call gives it) for the calls in ``scope`` of helpers that
    forward their flag and that the call leaves off. Only a helper whose file's text gives
    ``create_graph`` a name is resolved (a cheap test, with no parse, for an imported one)."""
    here = CREATE_GRAPH_TEXT.search(ctx.source) is not None
    imported = imported_names(ctx)
    for node in nodes_of(scope, CALLS):
        root = (dotted(node.func) or "").partition(".")[0]
        if not here and not (root in imported and imported_module_matches(ctx, node.func, CREATE_GRAPH)):
            continue
        helper = called_function(ctx, scope, node.func)
        flag = forwarded_flag(helper.ctx or ctx, helper) if helper is not None else None
        off = flag_off(helper, node, flag) if flag else None
        if off is not None:
            yield node, flag, off


def forwarded_flag(ctx: FileContext, helper: Scope, depth: int = 0) -> Optional[str]:
    if depth > MAX_DEPTH or isinstance(helper.node, ast.Module):
        return None
    return ctx.memo(("forwarded_flag", id(helper.node)), lambda: _forwarded(ctx, helper, depth))


def flag_off(helper: Scope, call: ast.Call, flag: str) -> Optional[ast.expr]:
    """The call gives the helper's flag ``False`` (that argument), or nothing where its default is
    ``False``/``None`` (the call itself); None when it may be true."""
    given = dict(bound_arguments(helper, call)).get(flag)
    if given is None:
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None  # ``**options`` may set it
        return call if _is_off(parameter_default(helper, flag)) else None
    return given if _is_off(given) else None


def _forwarded(ctx: FileContext, helper: Scope, depth: int) -> Optional[str]:
    own = set(parameters(helper))
    rebound = {n.id for n in scope_nodes(helper) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    candidates = own - rebound
    if not candidates:
        return None
    for call in backward_calls(ctx, helper):
        flag = call.keyword("create_graph") if call.kind == "autograd.grad" else None
        if flag is not None and isinstance(flag.value, ast.Name) and flag.value.id in candidates and returns_gradients(ctx, helper, call.node):
            return flag.value.id
    for node in nodes_of(helper, CALLS):
        inner = called_function(ctx, helper, node.func)
        if inner is None or inner.node is helper.node:
            continue
        passed = forwarded_flag(inner.ctx or ctx, inner, depth + 1)
        given = dict(bound_arguments(inner, node)).get(passed) if passed else None
        if isinstance(given, ast.Name) and given.id in candidates and returns_gradients(ctx, helper, node):
            return given.id
    return None


def _is_off(value: Optional[ast.expr]) -> bool:
    return isinstance(value, ast.Constant) and (value.value is False or value.value is None)
