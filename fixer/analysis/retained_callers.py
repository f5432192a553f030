"""What this file's callers pass for a function's parameter.

``callers_pass_data(ctx, scope, name)`` is True when the function (or method) of ``scope`` is
called in this file, only by its name (never passed around as a value), and every call gives the
parameter ``name`` a value that carries no graph (a tensor built from data, a number, a leaf):
then nothing the caller keeps can share the graph the function builds on it. A method counts
calls through ``self`` in its class and through names bound to ``ClassName(...)``.
"""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.call_sites import STARRED, argument_of, mentioned_outside, parameter_position
from fixer.analysis.callees import called_function
from fixer.analysis.graph import Kind, facts
from fixer.analysis.importers import importer_calls
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.scopes import RETURNS, Scope, nodes_of
from fixer.context import FileContext


def callers_pass_data(ctx: FileContext, scope: Scope, name: str) -> bool:
    return _callers(ctx, scope, name) == "data"


def callers_pass_graph(ctx: FileContext, scope: Scope, name: str) -> bool:
    """Some call in this file gives the parameter a value that certainly carries a graph."""
    return _callers(ctx, scope, name) == "graph"


def _callers(ctx: FileContext, scope: Scope, name: str) -> Optional[str]:
    """"data" when every call the project shows (this file's, the importing files') passes a
    value without a graph, "graph" when one passes a graph, None when unknown."""
    return ctx.memo(("retained_callers", id(scope.node), name), lambda: _verdict(ctx, scope, name))


def _verdict(ctx: FileContext, scope: Scope, name: str) -> Optional[str]:
    node = scope.node
    if isinstance(node, ast.Module):
        return None

    if not mentioned_outside(ctx, node) and not importer_calls(ctx, scope):
        return None  # not mentioned outside its own definition, nor called by a file importing it
    position = parameter_position(scope, name)
    if position is None:
        return None
    kinds = []
    for own, caller, call in project_call_sites(ctx, scope):
        argument = argument_of(call, name, position) if call is not None else STARRED
        if argument is STARRED and call is not None:
            spread = _spread_kinds(own, caller, call)
            if spread is not None and not any(k.arg is None for k in call.keywords) and 0 <= position < len(spread):
                kinds.append(spread[position])
                continue
        if argument is None:
            continue  # the default value
        kinds.append(Kind.UNKNOWN if argument is STARRED else facts(own, caller).kind(argument, call))
    if Kind.GRAPH in kinds:
        return "graph"
    if kinds and not node.decorator_list and all(k in (Kind.NONE, Kind.LEAF) for k in kinds):
        return "data"
    return None


def _spread_kinds(ctx: FileContext, caller: Scope, call: ast.Call) -> Optional[list[Kind]]:
    """The kinds of the positional arguments a call passes, ``*`` spreads included when the file
    shows their elements (``f(*(a, b))``, ``f(*sample(6))`` of a function of this project whose every
    return is a tuple of one length); None otherwise."""
    graph = facts(ctx, caller)
    kinds: list[Kind] = []
    for arg in call.args:
        if not isinstance(arg, ast.Starred):
            kinds.append(graph.kind(arg, call))
        elif isinstance(arg.value, (ast.Tuple, ast.List)):
            kinds.extend(graph.kind(e, call) for e in arg.value.elts)
        elif isinstance(arg.value, ast.Call) and (callee := called_function(ctx, caller, arg.value.func)):
            returns = [n for n in nodes_of(callee, RETURNS) if isinstance(n, ast.Return)]
            lengths = {len(r.value.elts) if isinstance(r.value, ast.Tuple) else -1 for r in returns}
            if not returns or len(lengths) != 1 or -1 in lengths:
                return None
            inner = facts(callee.ctx or ctx, callee)  # (a function of another project file, in its own file)
            kinds.extend(max(inner.kind(r.value.elts[i], r) for r in returns) for i in range(lengths.pop()))
        else:
            return None
    return kinds
