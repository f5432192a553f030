"""What this file binds its names to: functions and methods it defines, names its imports bind,
and ``nn.Module`` instances (``model = Net()``, ``rnn, head = nn.LSTM(...), nn.Linear(...)``)."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer import depends
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


def module_classes(ctx: FileContext) -> "ModuleClasses":
    """Classes that subclass ``nn.Module`` (directly or through each other): this file's, and
    those of other project files it imports and constructs or derives from (by the name that
    refers to them here, as ``names.qualified`` spells it). A set asked name by name: an imported
    name is resolved (the project file defining it parsed) only when it is asked, or when the
    classes are listed."""
    return ctx.memo("module_classes", lambda: ModuleClasses(ctx))


class _AskedByName:
    """A set of names whose members are judged one by one as they are asked. Each answer keeps the
    project files read to reach it and records them again when it is reused (``depends``: the
    result cache's record)."""

    def __init__(self, ctx: FileContext):
        self.ctx = ctx
        self._answers: dict[tuple[str, ...], tuple[object, Optional[dict]]] = {}

    def _remembered(self, key: tuple[str, ...], compute):
        return depends.kept_answer(self._answers, key, compute)


class ModuleClasses(_AskedByName):
    """``module_classes``'s answer."""

    def __init__(self, ctx: FileContext):
        super().__init__(ctx)
        self.local = {c.name for c in statement_index(ctx).classes}

    def __contains__(self, name: object) -> bool:
        return name in self._local_modules() or isinstance(name, str) and name not in self.local and self._imported(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._local_modules() | {n for n in self._used() - self.local if self._imported(n)})

    def _used(self) -> set[str]:
        return self._remembered(("used",), lambda: used_class_names(self.ctx))

    def _imported(self, name: str) -> bool:
        """An imported name the file uses whose class, where it is defined, derives nn.Module."""
        return self._remembered(("imported", name), lambda: name in self._used() and _imported_module_class(self.ctx, name, MAX_BASE_DEPTH))

    def _local_modules(self) -> set[str]:
        return self._remembered(("local",), self._derive_local)

    def _derive_local(self) -> set[str]:
        classes = statement_index(self.ctx).classes
        found: set[str] = set()
        changed = True
        while changed:
            changed = False
            for cls in classes:
                if cls.name in found:
                    continue
                for base in cls.bases:
                    base_name = qualified(self.ctx, base) or ""
                    if base_name.startswith("torch.nn.") or base_name in found or base_name in ("nn.Module", "Module") \
                            or base_name not in self.local and self._imported(base_name):
                        found.add(cls.name)
                        changed = True
                        break
        return found


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


def module_names(ctx: FileContext) -> "ModuleNames":
    """Dotted names assigned an ``nn.Module`` anywhere in the file (``model = Net()``,
    ``self.fc = nn.Linear(...)``, ``net = nn.Sequential(...).to(device)``), and the fields an
    object keeps for life from such a name (``self.net`` given ``Trainer(net)``): asked name by
    name, each name's assignments judged only when it is asked."""
    return ctx.memo("module_names", lambda: ModuleNames(ctx))


class ModuleNames(_AskedByName):
    """``module_names``'s answer."""

    def __init__(self, ctx: FileContext):
        super().__init__(ctx)
        self._values: dict[str, list[ast.expr]] = {}  # name -> the values the file's assignments give it
        for node in statement_index(ctx).assigns:
            for target in node.targets:
                for element, value in _unpacked(target, node.value):
                    name = dotted(element)
                    if name:
                        self._values.setdefault(name, []).append(value)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        given = held_for_life(self.ctx).get(name)
        return self._assigned_module(name) or given is not None and self._assigned_module(given)

    def _assigned_module(self, name: str) -> bool:
        values = self._values.get(name)
        return bool(values) and self._remembered((name,), lambda: any(
            is_module_construction(self.ctx, v, module_classes(self.ctx)) for v in values))


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
