"""Class models: per class of this file, which methods write each attribute of ``self``.

``attribute_writes(ctx, cls)`` maps an attribute name to its writes (``self.x = v``, ``self.x +=
v``, ``self.x: T = v``, ``del self.x``) in every method, each with its method, statement, value,
and whether it runs on every call of the method (top level of its body) and under ``no_grad``.
Computed once per class from the method scopes already indexed. ``constructor_field(ctx, cls,
attr)`` is the parameter of ``__init__`` an attribute holds for the object's whole life: stored
once, unconditionally, from the parameter itself, and written nowhere else in the class."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

from fixer.analysis.scopes import Scope, scope_nodes, scopes, under_no_grad
from fixer.context import FileContext


@dataclass(frozen=True)
class Write:
    method: Scope
    stmt: ast.stmt
    value: Optional[ast.expr]  # None for ``del``
    every_call: bool  # a statement of the method's top-level body
    no_grad: bool


def class_methods(ctx: FileContext, cls: ast.ClassDef) -> dict[str, Scope]:
    def compute() -> dict[str, Scope]:
        return {s.node.name: s for s in scopes(ctx) if s.class_node is cls and s.self_name}

    return ctx.memo(("class_methods", id(cls)), compute)


def attribute_writes(ctx: FileContext, cls: ast.ClassDef) -> dict[str, list[Write]]:
    def compute() -> dict[str, list[Write]]:
        found: dict[str, list[Write]] = {}
        for method in class_methods(ctx, cls).values():
            top = set(map(id, method.node.body))
            for node in scope_nodes(method):
                for target, value in _targets(node):
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == method.self_name:
                        write = Write(method, node, value, id(node) in top, under_no_grad(ctx, node))
                        found.setdefault(target.attr, []).append(write)
        return found

    return ctx.memo(("attribute_writes", id(cls)), compute)


def _targets(node: ast.AST) -> list[tuple[ast.expr, Optional[ast.expr]]]:
    if isinstance(node, ast.Assign):
        return [(t, node.value) for target in node.targets for t in _flat(target)]
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
        return [(node.target, node.value)]
    if isinstance(node, ast.Delete):
        return [(t, None) for t in node.targets]
    return []


def _flat(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for element in target.elts for t in _flat(element)]
    return [target.value] if isinstance(target, ast.Starred) else [target]


def constructor_field(ctx: FileContext, cls: ast.ClassDef, attr: str) -> Optional[str]:
    writes = attribute_writes(ctx, cls).get(attr, [])
    if len(writes) != 1:
        return None
    write = writes[0]
    init = write.method.node
    if init.name != "__init__" or not write.every_call or not isinstance(write.stmt, ast.Assign):
        return None
    if len(write.stmt.targets) != 1 or not isinstance(write.value, ast.Name):
        return None
    name = write.value.id
    args = init.args
    if name not in [a.arg for a in args.posonlyargs + args.args[1:] + args.kwonlyargs]:
        return None
    before = init.body[: init.body.index(write.stmt)]
    if any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for s in before for n in ast.walk(s)):
        return None  # the parameter was rebound first
    return name
