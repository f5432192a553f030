"""T3 of the refactoring-invariance generator: code moved into a second module ``helpers``,
imported absolutely (``from helpers import X``) or, in a package, relatively
(``from .helpers import X``). The helper module gets a copy of the main file's imports."""

from __future__ import annotations

import ast
import copy
from typing import Union

from tests.invariance_scope import BUILTINS, backpropagated, bound_in_nested, events, fresh, module_definitions

Moved = Union[tuple[str, str], str]  # (main text, helpers text), or why nothing moves


def _imports(tree: ast.Module) -> list:
    return [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]


def _free(node: ast.AST) -> set[str]:
    """Names ``node`` reads from its surroundings (a definition's own locals are not)."""
    if isinstance(node, ast.expr):
        return {name for kind, name in events(node) if kind == "load"}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound_in_nested(node)


def _import_line(module: str, package: bool, names: list[str]) -> ast.ImportFrom:
    return ast.ImportFrom(module, [ast.alias(n) for n in names], 1 if package else 0)


def _helpers(tree: ast.Module, body: list) -> str:
    future = [s for s in _imports(tree) if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    rest = [s for s in _imports(tree) if s not in future]
    return ast.unparse(ast.fix_missing_locations(ast.Module(future + rest + body, []))) + "\n"


def _insert_import(tree: ast.Module, line: ast.ImportFrom) -> None:
    index = 0
    for i, stmt in enumerate(tree.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            index = i + 1
    tree.body.insert(index, line)


def _own_relative_imports(tree: ast.Module) -> bool:
    """Relative imports of the fixture itself would change meaning inside the new package."""
    return any(isinstance(s, ast.ImportFrom) and s.level for s in ast.walk(tree))


def _movable(tree: ast.Module) -> set[str]:
    """Module-level classes and functions that need nothing but imports, builtins and each other."""
    defs = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    imported = module_definitions(tree) - {d.name for d in defs}
    movable = {d.name for d in defs}
    allowed = BUILTINS - {"__name__", "__file__", "__doc__"}
    changed = True
    while changed:
        changed = False
        for d in defs:
            blocked = any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(d))
            if d.name in movable and (blocked or not _free(d) <= (imported | movable | allowed)):
                movable.discard(d.name)
                changed = True
    return movable


def move_definitions(tree: ast.Module, module: str, package: bool) -> Moved:
    """Module-level classes and functions that need nothing but imports, builtins and each other."""
    if _own_relative_imports(tree):
        return "the program has relative imports of its own"
    defs = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    movable = _movable(tree)
    moved = [d for d in defs if d.name in movable]
    if not moved:
        return "no module-level class or function that can move"
    helpers = _helpers(tree, moved)
    tree.body = [s for s in tree.body if s not in moved]
    _insert_import(tree, _import_line(module, package, [d.name for d in moved]))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n", helpers


def extract_loss(tree: ast.Module, module: str, package: bool) -> Moved:
    """The value of ``X = expr`` whose X is backpropagated becomes ``compute_loss(...)``."""
    if _own_relative_imports(tree):
        return "the program has relative imports of its own"
    found = backpropagated(tree)
    if found is None:
        return "no backpropagated name assigned in the same block"
    block, index, _ = found
    expr = block[index].value
    if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr)) for n in ast.walk(expr)) or any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("super", "locals", "vars") for n in ast.walk(expr)
    ):
        return "the loss expression cannot leave its scope"
    imported = {n for s in _imports(tree) for n in ((a.asname or a.name).split(".")[0] for a in s.names)}
    params = sorted(_free(expr) - imported - (BUILTINS - _bound_anywhere(tree)), key=lambda n: _first_use(expr, n))
    movable = _movable(tree)
    functions = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name in movable]
    copied = [f for f in functions if f.name in params]  # a pure function is copied along, not passed
    params = [p for p in params if p not in {f.name for f in copied}]
    name = fresh(tree, "compute_loss")
    arguments = ast.arguments(posonlyargs=[], args=[ast.arg(p) for p in params], kwonlyargs=[], kw_defaults=[], defaults=[])
    helper = ast.FunctionDef(name, arguments, [ast.Return(expr)], [], None)
    helpers = _helpers(tree, [copy.deepcopy(f) for f in _with_callees(copied, functions)] + [helper])
    block[index].value = ast.Call(ast.Name(name, ast.Load()), [ast.Name(p, ast.Load()) for p in params], [])
    _insert_import(tree, _import_line(module, package, [name]))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n", helpers


def _bound_anywhere(tree: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)} | {
        n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    } | {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}


def _first_use(expr: ast.expr, name: str) -> tuple[int, int]:
    return min((n.lineno, n.col_offset) for n in ast.walk(expr) if isinstance(n, ast.Name) and n.id == name)


def _with_callees(chosen: list, functions: list) -> list:
    """``chosen`` and the module-level functions they call, in source order."""
    names, changed = {f.name for f in chosen}, True
    while changed:
        changed = False
        for f in functions:
            if f.name in names and not (_free(f) & {g.name for g in functions}) <= names:
                names |= _free(f) & {g.name for g in functions}
                changed = True
    return [f for f in functions if f.name in names]
