"""Which loop is a program's training loop, and what its body reads and rebinds: the facts the
refactoring-invariance generator (tests/invariance_gen.py) needs to move that body into a
function or a method without changing what the program computes. Anything it cannot reason
about (break, return, yield, global, a read before the first write of a name nobody bound
earlier) makes the extraction not applicable: ``plan`` returns None."""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from typing import Iterator, Optional, Union

Loop = Union[ast.For, ast.While]
FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
BUILTINS = set(dir(builtins))


@dataclass
class Plan:
    loop: Loop
    block: list  # the statement list holding the loop
    top: ast.stmt  # the module-level statement containing the loop
    module_level: bool
    params: list[str]  # names the body reads from outside, in first-use order (carried ones too)
    carried: list[str]  # rebound in the body and bound before the loop
    produced: list[str]  # first bound in the body
    targets: list[str]  # the for-loop's target names

    @property
    def rebound(self) -> list[str]:
        return self.carried + self.produced


def parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def calls_attribute(node: ast.AST, names: tuple[str, ...]) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in names for n in ast.walk(node))


def training_loop(tree: ast.Module) -> Optional[Loop]:
    """The innermost loop that calls ``backward`` (else ``step``), first in source order."""
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))]
    for names in (("backward",), ("step",)):
        found = [n for n in loops if calls_attribute(n, names)]
        inner = [n for n in found if not any(o is not n and o in set(ast.walk(n)) for o in found)]
        if inner:
            return min(inner, key=lambda n: (n.lineno, n.col_offset))
    return None


def events(node: ast.AST) -> Iterator[tuple[str, str]]:
    """("load" | "store", name) in evaluation order for this scope; nested scopes yield the
    loads of their free names (what they bind themselves shadows)."""
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        if node.value is not None:
            yield from events(node.value)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            yield ("load", node.target.id)
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            yield from events(target)
    elif isinstance(node, ast.For):
        yield from events(node.iter)
        yield from events(node.target)
        for child in node.body + node.orelse:
            yield from events(child)
    elif isinstance(node, ast.Name):
        yield ("load" if isinstance(node.ctx, ast.Load) else "store", node.id)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        for default in getattr(node.args, "defaults", []) if hasattr(node, "args") else []:
            yield from events(default)
        yield from ((kind, name) for kind, name in _free_loads(node))
        yield ("store", node.name)
    elif isinstance(node, NESTED):
        yield from _free_loads(node)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        yield from (("store", (a.asname or a.name).split(".")[0]) for a in node.names)
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield ("store", node.name)
        for child in node.body:
            yield from events(child)
    else:
        for child in ast.iter_child_nodes(node):
            yield from events(child)


def _free_loads(scope: ast.AST) -> Iterator[tuple[str, str]]:
    bound = bound_in_nested(scope)
    for n in ast.walk(scope):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound:
            yield ("load", n.id)


def bound_in_nested(scope: ast.AST) -> set[str]:
    bound = set()
    for n in ast.walk(scope):
        if isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            bound.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not scope:
            bound.add(n.name)
    return bound


def definitely_bound(body: list) -> set[str]:
    """Names every run of ``body`` binds (straight-line assignments, both branches of an if)."""
    names: set[str] = set()
    for stmt in body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and getattr(stmt, "value", None) is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            names |= {n.id for i in stmt.items if i.optional_vars for n in ast.walk(i.optional_vars) if isinstance(n, ast.Name)}
            names |= definitely_bound(stmt.body)
        elif isinstance(stmt, ast.For):  # assumes the loop runs: executing the variant checks it
            names |= {n.id for n in ast.walk(stmt.target) if isinstance(n, ast.Name)} | definitely_bound(stmt.body)
        elif isinstance(stmt, ast.If):
            names |= definitely_bound(stmt.body) & definitely_bound(stmt.orelse)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return names


def exposed_reads(body: list, definite: set) -> set[str]:
    """Names ``body`` may read before binding them itself (upward-exposed uses), given the names
    ``definite`` already bound on entry."""
    found, bound = set(), set(definite)
    for stmt in body:
        if isinstance(stmt, (ast.If, ast.While)):
            found |= _reads(stmt.test) - bound
            found |= exposed_reads(stmt.body, bound) | exposed_reads(stmt.orelse, bound)
        elif isinstance(stmt, ast.For):
            found |= _reads(stmt.iter) - bound
            targets = {n.id for n in ast.walk(stmt.target) if isinstance(n, ast.Name)}
            found |= exposed_reads(stmt.body, bound | targets) | exposed_reads(stmt.orelse, bound)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            found |= set().union(*(_reads(i.context_expr) for i in stmt.items)) - bound
            names = {n.id for i in stmt.items if i.optional_vars for n in ast.walk(i.optional_vars) if isinstance(n, ast.Name)}
            found |= exposed_reads(stmt.body, bound | names)
        elif isinstance(stmt, ast.Try):
            for block in [stmt.body, stmt.orelse, stmt.finalbody] + [h.body for h in stmt.handlers]:
                found |= exposed_reads(block, bound)
        else:
            local = set(bound)
            for kind, name in events(stmt):
                if kind == "load" and name not in local:
                    found.add(name)
                elif kind == "store":
                    local.add(name)
        bound |= definitely_bound([stmt])
    return found


def _reads(expr: ast.AST) -> set[str]:
    return {name for kind, name in events(expr) if kind == "load"}


def _unsupported(loop: Loop, in_class: bool) -> bool:
    """Statements that cannot leave the loop's scope unchanged."""
    def walk(node: ast.AST, in_inner_loop: bool) -> Iterator[bool]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                yield any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(child))
                continue
            if isinstance(child, (ast.Break, ast.Continue)) and not in_inner_loop:
                yield True
            if isinstance(child, (ast.Return, ast.Yield, ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal)):
                yield True
            if isinstance(child, ast.NamedExpr):
                yield True
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id in ("super", "locals", "vars", "exec", "eval"):
                yield True
            if in_class and isinstance(child, ast.Attribute) and child.attr.startswith("__") and not child.attr.endswith("__"):
                yield True  # name mangling ties the code to its class
            yield from walk(child, in_inner_loop or isinstance(child, (ast.For, ast.While)))

    body = ast.Module(body=loop.body, type_ignores=[])
    return any(walk(body, False))


def scope_chain(loop: Loop, up: dict) -> tuple[list, Optional[ast.stmt], bool]:
    """(enclosing function nodes, innermost first; the module-level statement; inside a class?)"""
    functions, node, in_class = [], loop, False
    while up.get(node) is not None and not isinstance(up[node], ast.Module):
        node = up[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(node)
        elif isinstance(node, ast.ClassDef):
            in_class = True
            if not functions:
                return functions, None, in_class  # a loop directly in a class body
    return functions, node, in_class


def _bound_in(scope: ast.AST, skip: ast.AST) -> dict[str, int]:
    """name -> first line it is bound in ``scope`` outside ``skip`` (parameters: line 0)."""
    found: dict[str, int] = {}
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = scope.args
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None:
                found[a.arg] = 0
    skipped = set(ast.walk(skip))

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if child in skipped:
                continue
            line = getattr(child, "lineno", 0)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.setdefault(child.name, line)
                continue
            if isinstance(child, NESTED):
                continue
            if isinstance(child, ast.Name) and not isinstance(child.ctx, ast.Load):
                found.setdefault(child.id, line)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                for a in child.names:
                    found.setdefault((a.asname or a.name).split(".")[0], line)
            elif isinstance(child, ast.ExceptHandler) and child.name:
                found.setdefault(child.name, line)
            visit(child)

    visit(scope)
    return found


def module_definitions(tree: ast.Module) -> set[str]:
    """Names the module binds by import, def or class (reachable as globals from anywhere)."""
    names = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(stmt.name)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return names


def plan(tree: ast.Module) -> Union[Plan, str]:
    """The training loop's extraction plan, or why its body cannot be moved."""
    loop = training_loop(tree)
    if loop is None:
        return "no loop calls backward or step"
    up = parents(tree)
    functions, top, in_class = scope_chain(loop, up)
    if top is None:
        return "the loop is directly in a class body"
    if _unsupported(loop, in_class):
        return "the body has break, continue, return, yield, global or a scope-bound call"
    holder = up[loop]
    block = next((b for b in (getattr(holder, f, None) for f in ("body", "orelse", "finalbody")) if isinstance(b, list) and loop in b), None)
    if block is None:
        return "the loop is not in a statement list"
    scope = functions[0] if functions else tree
    definitions = module_definitions(tree) if not functions else set()  # reached as globals, never passed
    before = {name: line for name, line in _bound_in(scope, loop).items() if line < loop.lineno and name not in definitions}
    outer = set().union(*(_bound_in(f, loop) for f in functions[1:])) if functions[1:] else set()
    module_vars = set(_bound_in(tree, loop)) - module_definitions(tree)
    targets = [n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)] if isinstance(loop, ast.For) else []
    body_events = [e for stmt in loop.body for e in events(stmt)]
    stored = {name for kind, name in body_events if kind == "store"}
    local_any = set(_bound_in(scope, loop)) if functions else set()
    definite = definitely_bound(loop.body)
    inside = set(ast.walk(loop))
    used_outside = {n.id for n in ast.walk(scope) if isinstance(n, ast.Name) and n not in inside}
    exposed = exposed_reads(loop.body, set())
    params, carried, produced, first = [], [], [], {}
    for kind, name in body_events:
        first.setdefault(name, kind)
    for name in first:
        known = name in before or name in targets or name in outer
        if not known and name in local_any:
            return f"{name} is a local bound only after the loop"
        if name in stored:
            if known:
                carried.append(name)
            elif name in exposed:
                return f"{name} is read before the body writes it, and nothing bound it before"
            elif not functions or name in used_outside:
                if name not in definite:
                    return f"{name} is needed after the loop but the body may not bind it"
                produced.append(name)
        elif name in exposed and (known or (functions and name in module_vars)):
            params.append(name)
    params += [name for name in carried if name not in params]
    return Plan(loop, block, top, not functions, params, carried, produced, targets)


def names_in(tree: ast.AST) -> set[str]:
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            names.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, ast.arg):
            names.add(n.arg)
        elif isinstance(n, ast.alias):
            names.add((n.asname or n.name).split(".")[0])
    return names


def fresh(tree: ast.AST, base: str) -> str:
    taken, name, i = names_in(tree), base, 1
    while name in taken:
        i += 1
        name = f"{base}{i}"
    return name


def backpropagated(tree: ast.Module) -> Optional[tuple[list, int, str]]:
    """(statement list, index of ``X = ...`` in it, X) for the first ``X.backward()`` whose X is
    assigned earlier in the same statement list."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for i, stmt in enumerate(block):
                for call in (n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
                    if call.func.attr == "backward" and isinstance(call.func.value, ast.Name):
                        name = call.func.value.id
                        for j in range(i - 1, -1, -1):
                            s = block[j]
                            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) and s.targets[0].id == name:
                                return block, j, name
                            if any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in ast.walk(s)):
                                break
    return None
