"""Binding a call's arguments to the callee's parameters: ``parameters(callee)`` (without ``self``
for a method) and ``bound_arguments(callee, call)`` for the plain positional and keyword
arguments, up to the first ``*args`` (what follows it cannot be placed), and
``parameter_default(callee, name)``."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.scopes import Scope


def parameters(callee: Scope) -> list[str]:
    args = callee.node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    return names[1:] if callee.self_name else names


def bound_arguments(callee: Scope, call: ast.Call) -> list[tuple[str, ast.expr]]:
    """(parameter, argument) for the call's plain positional and keyword arguments."""
    params = parameters(callee)
    bound: list[tuple[str, ast.expr]] = []
    for index, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            break
        if index < len(params):
            bound.append((params[index], arg))
    bound += [(k.arg, k.value) for k in call.keywords if k.arg in params]
    return bound


def parameter_default(callee: Scope, name: str) -> Optional[ast.expr]:
    """The default value of the parameter ``name`` (None: it has none)."""
    args = callee.node.args
    positional = args.posonlyargs + args.args
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults))
    defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None}
    return defaults.get(name)
