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

_MUTATORS = ("append", "extend", "insert", "add", "update", "__setitem__")


@lru_cache(maxsize=64)
def _tree(filename: str) -> Optional[ast.Module]:
    try:
        return ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return None


def _function(tree: ast.Module, code: CodeType) -> Optional[ast.AST]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if first == code.co_firstlineno or node.lineno == code.co_firstlineno:
                return node
    return tree if code.co_name == "<module>" else None


def _stores(node: ast.AST, attribute: str) -> bool:
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Attribute) and t.attr == attribute for target in targets for t in ast.walk(target))
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        return isinstance(func, ast.Attribute) and func.attr in _MUTATORS and isinstance(func.value, ast.Attribute) and func.value.attr == attribute
    return False


def fill_line(holder: str, code: CodeType, built_line: int) -> Optional[int]:
    """The line in ``code``'s function storing into the holder's last attribute, the first one
    at or after the line that built the value (else the first one)."""
    match = re.search(r"\.(\w+)(?:\[[^\]]*\])*$", holder)
    tree = _tree(code.co_filename)
    if match is None or tree is None:
        return None
    function = _function(tree, code)
    if function is None:
        return None
    lines = sorted(n.lineno for n in ast.walk(function) if _stores(n, match.group(1)))
    return next((line for line in lines if line >= built_line), lines[0] if lines else None)
