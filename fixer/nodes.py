"""``ast.walk`` and ``ast.iter_child_nodes``, about twice as fast, for the analysis's many walks.

The parser's trees are a third ``Load``/``Store`` markers and operator nodes (``ast.Add``,
``ast.Eq``): singletons that no analysis looks for in a walk (it reads ``node.ctx`` or
``node.op`` directly). They are not yielded, and fields that never hold a node (names,
identifiers, constants' values) are never read. The order is ``ast``'s: ``walk`` is breadth
first, ``child_nodes`` in field order.
"""

from __future__ import annotations

import ast
import gc
import warnings
from collections import deque
from typing import Iterator

# Fields holding operators, contexts or plain values (str, int, bool, a constant's value).
NOT_NODES = frozenset({"ctx", "op", "ops", "id", "attr", "name", "arg", "kind", "type_comment", "level", "module", "is_async", "conversion", "simple"})
_fields: dict[type, tuple[str, ...]] = {ast.Constant: ()}


def _node_fields(cls: type) -> tuple[str, ...]:
    found = _fields.get(cls)
    if found is None:
        found = _fields[cls] = tuple(name for name in cls._fields if name not in NOT_NODES)
    return found


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """The direct children of ``node`` that can hold code."""
    children = []
    for name in _node_fields(node.__class__):
        value = getattr(node, name, None)
        if value.__class__ is list:
            for item in value:
                if isinstance(item, ast.AST):
                    children.append(item)
        elif isinstance(value, ast.AST):
            children.append(value)
    return children


def preorder(roots: list[ast.AST], parents: dict[ast.AST, ast.AST], skipped: frozenset[type]) -> list[ast.AST]:
    """The nodes under ``roots`` in source order (depth first), each root included, never
    entering nor listing a node of a ``skipped`` class; each listed node's children recorded in
    ``parents``. ``child_nodes`` written inline: the walk every scope's analysis starts from."""
    found, stack = [], roots[::-1]
    while stack:
        node = stack.pop()
        cls = node.__class__
        if cls in skipped:
            continue
        found.append(node)
        children = []
        for name in _fields.get(cls) or _node_fields(cls):
            value = getattr(node, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        children.append(item)
                        parents[item] = node
            elif isinstance(value, ast.AST):
                children.append(value)
                parents[value] = node
        if children:
            children.reverse()
            stack += children
    return found


def subtree(node: ast.AST) -> list[ast.AST]:
    """``node`` and every node under it, in no set order (depth first, last child first): for
    questions about the set, without ``walk``'s queue and generator."""
    found, todo = [], [node]
    while todo:
        node = todo.pop()
        found.append(node)
        todo += child_nodes(node)
    return found


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and every node under it, breadth first."""
    todo = deque([node])
    while todo:
        node = todo.popleft()
        todo.extend(child_nodes(node))
        yield node


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` without warnings (invalid escapes are the user's business) and without the
    cycle collector: a tree has no cycles, and the collector, woken every few thousand of its
    nodes, would scan every object alive in the process each time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source, filename=filename)
    finally:
        if enabled:
            gc.enable()
