"""Dotted names and import aliases: ``th.autograd.grad`` and ``grad`` (from torch.autograd) both
resolve to ``torch.autograd.grad``."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.scopes import statement_index
from fixer.context import FileContext
from fixer.nodes import child_nodes

NAMING = frozenset({ast.ExceptHandler, ast.MatchAs, ast.MatchStar})  # nodes binding their ``name``


def dotted(node: ast.AST) -> Optional[str]:
    """``a.b.c`` for a Name/Attribute chain, else None. (Asked of most nodes the analysis meets:
    a plain name is answered first, and the node classes are compared, never subclassed.)"""
    if node.__class__ is ast.Name:
        return node.id
    parts: list[str] = []
    while node.__class__ is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if node.__class__ is ast.Name:
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def last_name(node: ast.AST) -> Optional[str]:
    """The final identifier of a Name/Attribute (``self.opt`` -> ``opt``)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def value_names(ctx: FileContext) -> frozenset[str]:
    """Every name the file binds to a value: assignment and loop targets, parameters, ``as`` names,
    pattern captures. A name bound only by ``class``, ``def`` or ``import`` is not one."""

    def compute() -> frozenset[str]:
        names: set[str] = set()
        todo: list[ast.AST] = [ctx.tree]  # every node, in no order (a set is made): no walk's queue
        while todo:
            node = todo.pop()
            kind = node.__class__
            if kind is ast.Name:
                if node.ctx.__class__ is ast.Store:
                    names.add(node.id)
                continue  # (a name holds no node)
            if kind is ast.arg:
                names.add(node.arg)
            elif kind in NAMING and node.name:
                names.add(node.name)
            elif kind is ast.MatchMapping and node.rest:
                names.add(node.rest)
            todo += child_nodes(node)
        return frozenset(names)

    return ctx.memo("value_names", compute)


def root_name(node: ast.AST) -> Optional[str]:
    """The name a Name/Attribute chain starts from (``self.loss_G`` -> ``self``), else None."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def import_aliases(ctx: FileContext) -> dict[str, str]:
    """Local name -> qualified name for every import in the file."""

    def compute() -> dict[str, str]:
        aliases: dict[str, str] = {}

        for node in statement_index(ctx).imports:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        aliases[alias.asname] = alias.name
                    else:
                        head = alias.name.split(".")[0]
                        aliases[head] = head
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        return aliases

    return ctx.memo("import_aliases", compute)


def torch_alias(ctx: FileContext) -> Optional[str]:
    """The name ``import torch`` (or ``import torch as th``) binds, if any."""
    for node in statement_index(ctx).imports:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch":
                    return alias.asname or "torch"
    return None


def qualified(ctx: FileContext, node: ast.AST) -> Optional[str]:
    """Dotted name with its head resolved through imports (``F.mse_loss`` -> ``torch.nn.functional.mse_loss``)."""
    name = dotted(node)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    resolved = import_aliases(ctx).get(head)
    if resolved is None:
        return name
    return f"{resolved}.{rest}" if rest else resolved


def is_torch(ctx: FileContext, node: ast.AST, *names: str) -> bool:
    """True if ``node`` names one of ``names`` (e.g. ``torch.no_grad``) through any import alias."""
    return qualified(ctx, node) in names
