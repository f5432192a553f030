"""Where a holder is filled: the line of the function that built a value which stores into the
holder's attribute (``self.prev = out``, ``out, self.h = ...``, ``self.log_probs.append(...)``),
or of a function of the same file it hands the value to (``self._advance(hc)`` storing
``self.state.h, self.state.c = hc``). Read from the function's source with ``ast``, once per file."""

from __future__ import annotations

import ast
import linecache
import re
from functools import lru_cache
from types import CodeType
from typing import Optional

from fixer.nodes import child_nodes, walk
from fixer.analysis.vocabulary import ADDS



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
        return isinstance(func, ast.Attribute) and func.attr in ADDS and _named(func.value, name, attribute)
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


def _last(holder: str) -> Optional[re.Match]:
    """(``.`` for an attribute, the holder's last name) of ``model.state.h[0]``."""
    return re.search(r"(\.?)(\w+)(?:\[[^\]]*\])*$", holder)


def _store_lines(function: ast.AST, match: re.Match) -> list[int]:
    return sorted(n.lineno for n in _own_nodes(function) if _stores(n, match.group(2), bool(match.group(1))))


def fill_line(holder: str, code: CodeType, built_line: int) -> Optional[int]:
    """The line in ``code``'s function storing into the holder's last attribute, the first one
    at or after the line that built the value (else the first one)."""
    match, tree = _last(holder), _tree(code.co_filename)
    function = _function(tree, code) if match is not None and tree is not None else None
    if function is None:
        return None
    lines = _store_lines(function, match)
    return next((line for line in lines if line >= built_line), lines[0] if lines else None)


def callees(tree: ast.Module, function: ast.AST, call: ast.Call) -> list[ast.AST]:
    """The functions of the file a call runs: ``self.NAME(...)`` a method of the caller's class,
    ``NAME(...)`` a function of the module."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        owners = [c for c in walk(tree) if isinstance(c, ast.ClassDef) and function in c.body]
        name = func.attr
    elif isinstance(func, ast.Name):
        owners, name = [tree], func.id
    else:
        return []
    return [n for owner in owners for n in owner.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]


def _bound_at(function: ast.AST, line: int) -> set[str]:
    """The names the statements starting at ``line`` bind (``pred, hc = self.model(x)``)."""
    targets = [t for n in _own_nodes(function) if isinstance(n, ast.Assign) and n.lineno == line for t in n.targets]
    return {n.id for t in targets for n in walk(t) if isinstance(n, ast.Name)}


def handed_fill(holder: str, code: CodeType, built_line: int) -> Optional[tuple[int, bool]]:
    """(the line, whether its function is a method) where a function of the same file, handed a
    name that the line building the value binds (``self._advance(hc)``), stores into the holder's
    attribute; a plain name is the callee's own local, never the holder."""
    match, tree = _last(holder), _tree(code.co_filename)
    function = _function(tree, code) if match is not None and match.group(1) and tree is not None else None
    built = _bound_at(function, built_line) if function is not None else set()
    handed = lambda call: any(isinstance(a, ast.Name) and a.id in built for a in [*call.args, *(k.value for k in call.keywords)])  # noqa: E731
    calls = sorted((n for n in _own_nodes(function) if isinstance(n, ast.Call) and n.lineno > built_line and handed(n)), key=lambda n: n.lineno) if built else []
    for call in calls:
        for callee in callees(tree, function, call):
            lines = _store_lines(callee, match)
            if lines:
                first = callee.args.posonlyargs + callee.args.args
                return lines[0], bool(first) and first[0].arg == "self"
    return None
