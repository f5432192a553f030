#!/usr/bin/env python3
"""What a reader must open to follow one rule (design/architecture-review-2026-11-27.md, §1.5):
the transitive closure of the project definitions a rule module's code uses, across files.

    python benchmarks/reading_cost.py GF101 GF103 GF203 GF104     # rule codes, or module paths
    python benchmarks/reading_cost.py --root /tmp/main-snapshot GF101 --list

A *definition* is a top-level function, class (with its methods) or assigned name of a module of
the project's packages (``fixer``, ``codemods``). From every definition of the rule module, the
names its code reads (function and method bodies, class bases, assigned values; not annotations)
are resolved: a definition of the same module, a name imported from a project module (followed
through re-exports), or ``module.name`` where ``module`` is an imported project module. Then the
same for every definition reached. A name that a function binds itself (a parameter, a local)
is its own, not the module's. Attributes of values (``ctx.memo``, ``graph.kind``) are not
followed: that is the walk of ``ctx``, another measure.

Prints, per rule: defs reached, lines reached (the definitions' own lines, decorators included),
files, and in brackets the files under ``fixer/analysis/``. Reads source only (``ast``), so it
measures any checkout: ``git archive main | tar -x -C DIR`` and ``--root DIR``.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("fixer", "codemods")
MAX_REEXPORTS = 8


@dataclass
class Module:
    name: str  # dotted: fixer.analysis.carried
    path: Path
    defs: dict[str, ast.AST] = field(default_factory=dict)  # top-level name -> its node
    imports: dict[str, tuple[str, Optional[str]]] = field(default_factory=dict)  # bound name -> (module, name or None)


def _imports(nodes, package: str, is_package: bool) -> dict[str, tuple[str, Optional[str]]]:
    """Names bound by the ``import`` statements among ``nodes``: to a module (name None) or to a
    name in a module."""
    found: dict[str, tuple[str, Optional[str]]] = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    found[alias.asname] = (alias.name, None)
                else:  # ``import a.b`` binds ``a``
                    found[alias.name.split(".")[0]] = (alias.name.split(".")[0], None)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's own package
                parts = package.split(".") if is_package else package.split(".")[:-1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                if alias.name != "*":
                    found[alias.asname or alias.name] = (base, alias.name)
    return found


def _bound_names(node: ast.AST) -> set[str]:
    """Targets assigned in ``node``'s target list (for ``a, b = ...``)."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def load(root: Path, packages=PACKAGES) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError):
                continue
            module = Module(name, path)
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    module.defs[node.name] = node
                elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        for bound in _bound_names(target):
                            module.defs.setdefault(bound, node)
            top_imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) and _top_level(tree, n)]
            module.imports = _imports(top_imports, name, is_package)
            modules[name] = module
    return modules


def _top_level(tree: ast.Module, node: ast.AST) -> bool:
    """An import outside every function (at the top, or under ``if``/``try`` there)."""
    stack = list(tree.body)
    while stack:
        current = stack.pop()
        if current is node:
            return True
        if not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(current))
    return False


def _references(node: ast.AST) -> tuple[set[str], set[tuple[str, str]], dict[str, tuple[str, Optional[str]]]]:
    """(plain names read, ``a.b`` pairs read, imports made inside) in the running code of ``node``
    (a function's body, defaults and decorators; a class's bases, decorators and each of its
    statements and methods; an assignment's value; not annotations), less the names a function
    binds itself."""
    if isinstance(node, ast.ClassDef):
        names: set[str] = set()
        pairs: set[tuple[str, str]] = set()
        imported: dict[str, tuple[str, Optional[str]]] = {}
        for part in [*node.bases, *node.decorator_list, *node.body]:
            more = _references(part) if isinstance(part, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else _reads([part], set())
            names |= more[0]
            pairs |= more[1]
            imported.update(more[2])
        return names, pairs, imported
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = node.args
        own = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
        parts = [*node.body, *args.defaults, *(d for d in args.kw_defaults if d is not None), *node.decorator_list]
        return _reads(parts, own, function=True)
    if isinstance(node, (ast.Assign, ast.AugAssign)) or isinstance(node, ast.AnnAssign) and node.value is not None:
        return _reads([node.value], set())
    return _reads([node], set()) if not isinstance(node, ast.AnnAssign) else (set(), set(), {})


def _reads(parts: list[ast.AST], local: set[str], function: bool = False):
    names: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    inner_imports: list[ast.AST] = []
    for part in parts:
        for child in ast.walk(part):
            if isinstance(child, ast.Name):
                if isinstance(child.ctx, ast.Load):
                    names.add(child.id)
                elif function:
                    local.add(child.id)
            elif isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name) and isinstance(child.ctx, ast.Load):
                pairs.add((child.value.id, child.attr))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                args = child.args
                local.update(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a)
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                inner_imports.append(child)
            elif isinstance(child, ast.ExceptHandler) and child.name:
                local.add(child.name)
    imported = _imports(inner_imports, "", False)
    local = local - set(imported)
    return names - local, {p for p in pairs if p[0] not in local}, imported


def _resolve(modules: dict[str, Module], module: str, name: str, depth: int = 0) -> Optional[tuple[str, str]]:
    """The (module, name) of the project definition ``name`` of ``module`` stands for."""
    found = modules.get(module)
    if found is None or depth > MAX_REEXPORTS:
        return None
    if name in found.defs:
        return module, name
    if name in found.imports:
        target, attr = found.imports[name]
        return _resolve(modules, target, attr, depth + 1) if attr is not None else None
    return None


def _module_of(modules: dict[str, Module], binding: tuple[str, Optional[str]]) -> Optional[str]:
    """The project module a bound name stands for: ``import fixer.x as x`` or ``from fixer import x``."""
    target, attr = binding
    if attr is None:
        return target if target in modules else None
    return f"{target}.{attr}" if f"{target}.{attr}" in modules else None


def closure(modules: dict[str, Module], start: str) -> set[tuple[str, str]]:
    """Every (module, name) definition reached from the definitions of the module ``start``."""
    todo = [(start, name) for name in modules[start].defs]
    seen = set(todo)
    while todo:
        module_name, name = todo.pop()
        module = modules[module_name]
        names, pairs, inner = _references(module.defs[name])
        bindings = {**module.imports, **inner}
        reached: set[tuple[str, str]] = set()
        for read in names:
            if read in module.defs and read not in inner:
                reached.add((module_name, read))
            elif read in bindings and bindings[read][1] is not None:
                if found := _resolve(modules, *bindings[read]):
                    reached.add(found)
        for base, attr in pairs:
            if base in module.defs and base not in inner:
                continue
            target = _module_of(modules, bindings[base]) if base in bindings else None
            if target is not None and (found := _resolve(modules, target, attr)):
                reached.add(found)
        for each in reached - seen:
            seen.add(each)
            todo.append(each)
    return seen


def _lines(node: ast.AST) -> int:
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return node.end_lineno - first + 1


def cost(modules: dict[str, Module], start: str) -> dict:
    reached = closure(modules, start)
    nodes = {id(modules[m].defs[n]): (m, modules[m].defs[n]) for m, n in reached}  # ``a, b = ...``: one statement
    files = {m for m, _ in nodes.values()}
    return {
        "defs": len(nodes),
        "functions": sum(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for _, node in nodes.values()),
        "lines": sum(_lines(node) for _, node in nodes.values()),
        "files": len(files),
        "analysis_files": len({m for m in files if m.startswith("fixer.analysis.")}),
        "reached": sorted(reached),
    }


def rule_module(modules: dict[str, Module], which: str) -> Optional[str]:
    """The module of a rule code (``code = "GF101"`` in a ``codemods`` class) or a module path."""
    if which.endswith(".py"):
        name = ".".join(Path(which).with_suffix("").parts)
        return name if name in modules else None
    if which in modules:
        return which
    for name, module in modules.items():
        for node in module.defs.values():
            if isinstance(node, ast.ClassDef) and any(
                isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "code" for t in s.targets)
                and isinstance(s.value, ast.Constant) and s.value.value == which
                for s in node.body
            ):
                return name
    return None


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rules", nargs="+", help="rule codes (GF101) or module paths (codemods/x.py)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure")
    parser.add_argument("--list", action="store_true", help="also list the definitions reached")
    args = parser.parse_args(argv)
    modules = load(args.root)
    status = 0
    for which in args.rules:
        start = rule_module(modules, which)
        if start is None:
            print(f"{which}: no such rule module", file=sys.stderr)
            status = 2
            continue
        found = cost(modules, start)
        print(f"{which} {start}: {found['defs']} defs ({found['functions']} functions and classes), {found['lines']:,} lines, "
              f"{found['files']} files ({found['analysis_files']} analysis files)")
        if args.list:
            for module, name in found["reached"]:
                print(f"    {module}.{name}")
    return status


if __name__ == "__main__":
    sys.exit(main())
