"""The ``forward`` a module call runs: ``model(x)`` after ``model = Tagger()`` (a module class of
this file, or one imported from another project file), ``self.rnn(x)`` when the object keeps for
life the ``rnn`` its one construction was given (class_model). None when the file does not say.

A plain name is read as Python scopes it: a binding local to another function (``model =
Counter()`` in a helper) is not the ``model`` a method reads from the module."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.bindings import module_classes
from fixer.analysis.class_model import held_arguments
from fixer.analysis.imported_definitions import imported_class
from fixer.analysis.names import dotted, qualified
from fixer.analysis.scopes import Scope, scopes, statement_index
from fixer.context import FileContext

MOVES = ("to", "cuda", "cpu", "train", "double", "float")  # ``Net().to(device)`` is still the ``Net()``


def forward_scope(ctx: FileContext, func: ast.expr) -> Optional[Scope]:
    """The ``forward`` method run by calling ``func`` when it holds an instance of a module class
    defined in this file or imported from another project file (``model = Tagger()`` ... ``model(x)``)."""
    name = dotted(func)
    if name is None:
        return None
    given = given_for_life(ctx, name.split(".", 1)[1] if name.startswith("self.") else None)
    if given is not None:
        return forward_scope(ctx, given)
    classes = module_classes(ctx)
    for value in _visible(ctx, name, func):
        cls = dotted(value.func)
        local = next((s for s in scopes(ctx) if s.class_node is not None and s.class_node.name == cls and s.node.name == "forward"), None) if cls in classes else None
        if local is not None:
            return local
        found = imported_class(ctx, qualified(ctx, value.func) or "")
        if found is not None and found[1].bases:  # a subclass (of nn.Module, if called as one)
            return next((s for s in scopes(found[0]) if s.class_node is found[1] and s.node.name == "forward"), None)
        if cls in classes:
            return None
    return None


def given_for_life(ctx: FileContext, attr: Optional[str]) -> Optional[ast.expr]:
    """``self.rnn`` -> ``rnn`` given to the one construction ``Trainer(rnn, ...)`` (class_model):
    the argument itself, so that the name is scoped where the construction reads it."""
    given = held_arguments(ctx).get(f"self.{attr}") if attr else None
    return given if isinstance(given, ast.Name) else None


def _visible(ctx: FileContext, name: str, read: ast.expr) -> list[ast.Call]:
    """The calls bound to ``name`` that ``read`` can see: for a plain name, those of the module
    and of the functions around the read, not those local to other functions (a read we cannot
    place, or a dotted name, sees every binding)."""
    found = bound_calls(ctx).get(name, [])
    if "." in name or ctx.parent(read) is None:
        return [call for call, _ in found]
    around = [a for a in ctx.ancestors(read) if isinstance(a, FUNCTIONS)]
    return [call for call, owner in found if owner is None or any(owner is a for a in around)]


def bound_calls(ctx: FileContext) -> dict[str, list[tuple[ast.Call, Optional[ast.AST]]]]:
    """Per dotted name, the calls the file's assignments bind it to, in order (one scan), each
    with the function whose body binds it (None: the module's own statements)."""
    def compute() -> dict[str, list[tuple[ast.Call, Optional[ast.AST]]]]:
        found: dict[str, list[tuple[ast.Call, Optional[ast.AST]]]] = {}
        for node in statement_index(ctx).assigns:
            value = node.value
            while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MOVES:
                value = value.func.value
            if isinstance(value, ast.Call):
                owner = next((a for a in ctx.ancestors(node) if isinstance(a, (*FUNCTIONS, ast.ClassDef))), None)
                for name in {dotted(t) for t in node.targets} - {None}:
                    found.setdefault(name, []).append((value, owner))
        return found

    return ctx.memo("constructions", compute)


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
