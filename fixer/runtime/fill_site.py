"""Where a holder is filled: the line of the function that built a value which stores into the
holder's attribute (``self.prev = out``, ``out, self.h = ...``, ``self.log_probs.append(...)``).
Read from the function's source with ``ast``, once per file."""

from __future__ import annotations

import ast
import linecache
import re
from functools import lru_cache
from types import CodeType
from typing import Optional

from fixer.nodes import child_nodes, walk

_MUTATORS = ("append", "extend", "insert", "add", "update", "__setitem__")


@lru_cache(maxsize=64)
def _tree(filename: str) -> Optional[ast.Module]:
    try:
        return ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return None


def _function(tree: ast.Module, code: CodeType) -> Optional[ast.AST]:
    for node in walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first == code.co_firstlineno or node.lineno == code.co_firstlineno:
                return node
    return tree if code.co_name == "<module>" else None


def _named(node: ast.AST, name: str, attribute: bool) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == name) if attribute else (isinstance(node, ast.Name) and node.id == name)


def _stores(node: ast.AST, name: str, attribute: bool) -> bool:
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(_named(t, name, attribute) for target in targets for t in walk(target))
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        return isinstance(func, ast.Attribute) and func.attr in _MUTATORS and _named(func.value, name, attribute)
    return False


def _own_nodes(function: ast.AST):
    """The nodes of a function (or module) body, not of the functions and classes it defines."""
    stack = list(child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        stack.extend(child_nodes(node))


def loop_line(code: CodeType, line: int) -> Optional[int]:
    """The line of the innermost ``for``/``while`` of ``code``'s function whose body holds ``line``."""
    tree = _tree(code.co_filename)
    function = _function(tree, code) if tree is not None else None
    if function is None:
        return None
    loops = [n for n in _own_nodes(function) if isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and n.body[0].lineno <= line <= (n.end_lineno or 0)]
    return max((n.lineno for n in loops), default=None)


def fill_line(holder: str, code: CodeType, built_line: int) -> Optional[int]:
    """The line in ``code``'s function storing into the holder's last attribute, the first one
    at or after the line that built the value (else the first one)."""
    match = re.search(r"(\.?)(\w+)(?:\[[^\]]*\])*$", holder)
    tree = _tree(code.co_filename)
    if match is None or tree is None:
        return None
    function = _function(tree, code)
    if function is None:
        return None
    lines = sorted(n.lineno for n in _own_nodes(function) if _stores(n, match.group(2), bool(match.group(1))))
    return next((line for line in lines if line >= built_line), lines[0] if lines else None)
