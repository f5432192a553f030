"""What a stretch of statements may do to gradients and parameters.

``gradient_effect(ctx, scope, stmts)`` answers NONE (provably neither reads nor changes any
``.grad`` nor any parameter: forward passes, arithmetic, logging), READS (reads or resets
gradients: ``.grad``, ``zero_grad()``, gradient clipping, another backward call) or CHANGES
(may change parameters in place: ``optimizer.step()``, in-place tensor methods, assignments into
attributes or items, or a call we cannot see into). Functions of this file and those imported
from other project files are looked into."""

from __future__ import annotations

import ast
import enum
import re
from typing import Iterable, Optional

from fixer.analysis.calls import backward_call, optimizer_call
from fixer.analysis.graph import PLAIN_BUILTINS, facts
from fixer.analysis.imported_definitions import imported_function
from fixer.analysis.names import qualified
from fixer.analysis.scopes import NESTED, Scope, scopes
from fixer.context import FileContext
from fixer.nodes import child_nodes


class Effect(enum.IntEnum):
    NONE = 0
    READS = 1
    CHANGES = 2


HARMLESS_BUILTINS = PLAIN_BUILTINS | {"min", "max", "abs", "round", "sum", "list", "tuple", "dict", "sorted", "any", "all", "map"}
# method names that never touch gradients or parameters (logging, containers, tensor reads)
HARMLESS_METHODS = frozenset(
    {"item", "detach", "cpu", "numpy", "tolist", "append", "extend", "format", "join", "info", "debug", "warning",
     "add_scalar", "add_scalars", "update", "mean", "sum", "size", "dim", "clone", "view", "reshape", "float",
     "softmax", "log_softmax", "argmax", "max", "min", "exp", "log", "abs", "pow", "sqrt", "norm", "get", "keys",
     "values", "items", "squeeze", "unsqueeze", "flatten", "to"}
)
HARMLESS_MODULES = re.compile(r"^(logging|logger|log|math|time|np|numpy|random|sys|os|print)\b")
GRADIENT_NAME = re.compile(r"grad|autograd|backward")
MAX_DEPTH = 2


def gradient_effect(ctx: FileContext, scope: Scope, stmts: Iterable[ast.stmt], depth: int = 0) -> Effect:
    effect = Effect.NONE
    for stmt in stmts:
        for node in _walk(stmt):
            effect = max(effect, _node_effect(ctx, scope, node, depth))
            if effect == Effect.CHANGES:
                return effect
    return effect


def _walk(stmt: ast.AST):
    stack = [stmt]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, NESTED):
            stack.extend(child_nodes(node))


def _node_effect(ctx: FileContext, scope: Scope, node: ast.AST, depth: int) -> Effect:
    if isinstance(node, ast.Attribute) and node.attr in ("grad", "_grad"):
        return Effect.READS if isinstance(node.ctx, ast.Load) else Effect.CHANGES
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(_writes_into_object(target, scope.self_name) for target in targets):
            return Effect.CHANGES
        return Effect.NONE
    if isinstance(node, (ast.Delete, ast.Global, ast.Nonlocal)):
        return Effect.CHANGES
    if isinstance(node, ast.Call):
        return _call_effect(ctx, scope, node, depth)
    return Effect.NONE


TENSOR_FIELDS = frozenset({"data", "grad", "_grad", "requires_grad"})


def _writes_into_object(target: ast.AST, self_name: Optional[str] = None) -> bool:
    """``p.data -= ...``, ``w[0] = ...``, ``model.w = ...``: may change a parameter in place. A
    method's own field (``self.loss = ...``) is rebound, not written into."""
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_writes_into_object(t, self_name) for t in target.elts)
    if isinstance(target, ast.Starred):
        return _writes_into_object(target.value, self_name)
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == self_name:
        return target.attr in TENSOR_FIELDS
    return not isinstance(target, ast.Name)


def _call_effect(ctx: FileContext, scope: Scope, call: ast.Call, depth: int) -> Effect:
    optimizer = optimizer_call(ctx, call)
    if optimizer is not None:
        return Effect.READS if optimizer.kind == "zero_grad" else Effect.CHANGES
    if backward_call(ctx, call) is not None:
        return Effect.READS
    func = call.func
    name = qualified(ctx, func) or ""
    short = func.attr if isinstance(func, ast.Attribute) else name
    if GRADIENT_NAME.search(short) or GRADIENT_NAME.search(name.rsplit(".", 1)[0] if "." in name else ""):
        return Effect.READS if not short.endswith("_") else Effect.CHANGES
    if short.endswith("_") and not short.startswith("_"):
        return Effect.CHANGES  # an in-place tensor method
    if isinstance(func, ast.Name) and func.id in HARMLESS_BUILTINS:
        return Effect.NONE
    if isinstance(func, (ast.Name, ast.Attribute)) and depth < MAX_DEPTH:
        helper = (_function(ctx, func.id) if isinstance(func, ast.Name) else None) or imported_function(ctx, func)
        if helper is not None:
            own = helper.ctx or ctx  # a function of another project file is read in its own file
            return gradient_effect(own, helper, helper.node.body, depth + 1)
    if name.startswith("torch.") or HARMLESS_MODULES.match(name):
        return Effect.NONE
    if facts(ctx, scope).is_module(func):
        return Effect.NONE  # a forward pass
    if isinstance(func, ast.Attribute) and short in HARMLESS_METHODS:
        return Effect.NONE
    return Effect.CHANGES  # a call we cannot see into


def _function(ctx: FileContext, name: str):
    for scope in scopes(ctx):
        if isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and scope.node.name == name and scope.class_node is None:
            return scope
    return None
