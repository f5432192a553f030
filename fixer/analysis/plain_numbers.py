"""Parameters and ``self`` attributes that hold plain numbers, not tensors: a parameter
annotated ``int``/``float``/``bool``/``str`` or defaulting to such a constant, and an attribute
the class's methods only ever assign a number, a number-valued parameter or a configuration
value (``self.gamma = args.gamma``). ``retained.GraphSources`` reads no graph through them."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.names import dotted
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.context import FileContext
from fixer.nodes import walk


SCALAR_ANNOTATIONS = frozenset({"int", "float", "bool", "str"})


def parameters(scope: Scope) -> set[str]:
    node = scope.node
    if isinstance(node, ast.Module):
        return set()
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return set(names)


def plain_parameter(scope: Scope, name: str) -> bool:
    """Annotated ``int``/``float``/``bool``/``str`` or defaulting to such a constant."""
    args = scope.node.args
    positional = args.posonlyargs + args.args
    defaults = dict(zip([a.arg for a in positional[len(positional) - len(args.defaults):]], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    for arg in positional + args.kwonlyargs:
        if arg.arg == name and isinstance(arg.annotation, ast.Name) and arg.annotation.id in SCALAR_ANNOTATIONS:
            return True
    default = defaults.get(name)
    return isinstance(default, ast.Constant) and isinstance(default.value, (int, float, str)) and default.value is not True


def plain_attribute(ctx: FileContext, scope: Scope, name: str) -> bool:
    """``self.gamma`` only ever assigned (in the class's methods) a number, a number-valued
    parameter or a configuration value (``args.gamma``)."""
    attribute = name.split(".")[1]
    values = []
    for method in scopes(ctx):
        if method.class_node is not scope.class_node or method.self_name is None:
            continue
        for node in scope_nodes(method):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                for element in walk(target):
                    if isinstance(element, ast.Attribute) and element.attr == attribute and dotted(element.value) == method.self_name:
                        values.append((method, node.value))
    return bool(values) and all(_plain_value(method, value) for method, value in values)


def _plain_value(method: Scope, value: Optional[ast.expr]) -> bool:
    if isinstance(value, ast.UnaryOp):
        value = value.operand
    if isinstance(value, ast.Constant):
        return isinstance(value.value, (int, float)) and not isinstance(value.value, bool)
    if isinstance(value, ast.Name):
        return value.id in parameters(method) and plain_parameter(method, value.id)
    name = dotted(value) if isinstance(value, ast.Attribute) else None
    return bool(name) and name.split(".")[0] in parameters(method) and name.split(".")[0] != method.self_name
