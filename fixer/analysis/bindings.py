"""What this file binds its names to: functions and methods it defines, names its imports bind,
and ``nn.Module`` instances (``model = Net()``, ``rnn, head = nn.LSTM(...), nn.Linear(...)``)."""

from __future__ import annotations

import ast
from typing import Iterator

from fixer.analysis.call_sites import argument_of, parameter_position
from fixer.analysis.class_model import held_for_life
from fixer.analysis.imported_definitions import imported_class
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.names import dotted, qualified
from fixer.analysis.scopes import scope_nodes, scopes, statement_index
from fixer.analysis.vocabulary import constructs_torch_nn_class
from fixer.context import FileContext
from fixer.nodes import subtree


def defined_functions(ctx: FileContext) -> set[str]:
    """Names of the functions and methods defined in this file."""
    return ctx.memo("defined_functions", lambda: {s.node.name for s in scopes(ctx) if not isinstance(s.node, ast.Module)})


def imported_names(ctx: FileContext) -> set[str]:
    """Names bound by imports (functions, classes, modules of other packages: unknown values)."""

    def compute() -> set[str]:
        found: set[str] = set()
        for node in statement_index(ctx).imports:
            for alias in node.names:
                found.add(alias.asname or alias.name.split(".")[0])
        return found

    return ctx.memo("imported_names", compute)


def module_classes(ctx: FileContext) -> set[str]:
    """Classes that subclass ``nn.Module`` (directly or through each other): this file's, and
    those of other project files it imports and constructs or derives from (by the name that
    refers to them here, as ``names.qualified`` spells it)."""

    def compute() -> set[str]:
        classes = statement_index(ctx).classes
        local = {c.name for c in classes}
        found = {name for name in used_class_names(ctx) - local if _imported_module_class(ctx, name, MAX_BASE_DEPTH)}
        changed = True
        while changed:
            changed = False
            for cls in classes:
                if cls.name in found:
                    continue
                for base in cls.bases:
                    base_name = qualified(ctx, base) or ""
                    if base_name.startswith("torch.nn.") or base_name in found or base_name in ("nn.Module", "Module"):
                        found.add(cls.name)
                        changed = True
                        break
        return found

    return ctx.memo("module_classes", compute)


MAX_BASE_DEPTH = 3  # imported bases followed this deep (``Net(Base)`` with ``Base(nn.Module)`` elsewhere)


def used_class_names(ctx: FileContext) -> set[str]:
    """Qualified names this file calls in an assignment or derives a class from: the only imported
    names whose classes matter here."""
    names = {qualified(ctx, base) for cls in statement_index(ctx).classes for base in cls.bases}
    for node in statement_index(ctx).assigns:
        for call in subtree(node.value):
            if isinstance(call, ast.Call):
                names.add(qualified(ctx, call.func))
    return {n for n in names if n and not n.startswith("torch.")}


def _imported_module_class(ctx: FileContext, name: str, depth: int) -> bool:
    """``name`` is imported from another project file and subclasses ``nn.Module``, judging only
    that class's bases (each resolved where it is defined)."""
    found = imported_class(ctx, name)
    if found is None or depth <= 0:
        return False
    home, cls = found
    return _derives_module(home, cls, depth - 1)


def _derives_module(ctx: FileContext, cls: ast.ClassDef, depth: int) -> bool:
    for base in cls.bases:
        base_name = qualified(ctx, base) or ""
        if base_name.startswith("torch.nn.") or base_name in ("nn.Module", "Module"):
            return True
        local = [c for c in statement_index(ctx).classes if c.name == base_name and c is not cls]
        if local and depth > 0 and _derives_module(ctx, local[0], depth - 1):
            return True
        if not local and _imported_module_class(ctx, base_name, depth):
            return True
    return False


def module_names(ctx: FileContext) -> set[str]:
    """Dotted names assigned an ``nn.Module`` anywhere in the file (``model = Net()``,
    ``self.fc = nn.Linear(...)``, ``net = nn.Sequential(...).to(device)``)."""

    def compute() -> set[str]:
        classes = module_classes(ctx)
        found: set[str] = set()
        for node in statement_index(ctx).assigns:
            for target in node.targets:
                for element, value in _unpacked(target, node.value):
                    name = dotted(element)
                    if name and is_module_construction(ctx, value, classes):
                        found.add(name)
        found |= {field for field, name in held_for_life(ctx).items() if name in found}  # self.net given Trainer(net)
        return found

    return ctx.memo("module_names", compute)


def _unpacked(target: ast.expr, value: ast.expr) -> Iterator[tuple[ast.expr, ast.expr]]:
    """(target, value) pairs of an assignment, element by element for ``a, b = x, y``."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) and len(target.elts) == len(value.elts):
        for element, part in zip(target.elts, value.elts):
            yield from _unpacked(element, part)
    else:
        yield target, value


def is_module_construction(ctx: FileContext, value: ast.expr, classes: set[str]) -> bool:
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in ("to", "cuda", "cpu", "train", "eval", "double", "float"):
        value = value.func.value
    if not isinstance(value, ast.Call):
        return False
    name = qualified(ctx, value.func) or ""
    if constructs_torch_nn_class(name):
        return name.rsplit(".", 1)[-1] != "Parameter"
    return name in classes


def module_parameter(ctx: FileContext, scope, name: str) -> bool:
    """The parameter ``name`` of a function holds an ``nn.Module`` on every call the project shows
    (in this file and in the files importing it): each passes a name its file binds to a module, or
    constructs one in place. The function never rebinds it; a use that is no call knows nothing."""
    node = scope.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.decorator_list:
        return False
    return ctx.memo(("module_parameter", id(node), name), lambda: _module_parameter(ctx, scope, name))


def _module_parameter(ctx: FileContext, scope, name: str) -> bool:
    position = parameter_position(scope, name)
    if position is None or any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in scope_nodes(scope)):
        return False
    found = False
    for own, caller, call in project_call_sites(ctx, scope):
        argument = argument_of(call, name, position) if call is not None and caller is not scope else None
        if not isinstance(argument, ast.expr) or isinstance(argument, ast.Starred):
            return False
        if not (dotted(argument) in module_names(own) or is_module_construction(own, argument, module_classes(own))):
            return False
        found = True
    return found
