"""Where this file uses a function or method, and what a call passes for a parameter: the call
sites (``call_sites``: a method's through ``self``, through names bound to ``ClassName(...)`` and
through the class itself), a parameter's position and the argument a call gives it
(``parameter_position``, ``argument_of``; ``STARRED`` when a ``*``/``**`` hides it), and the
cheap word tests from the file's text (``word_counts``, ``mentioned_outside``)."""

from __future__ import annotations

import ast
import collections
import re
from typing import Iterator, Optional

from fixer.analysis.assignments import scope_assignments
from fixer.analysis.names import value_names
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.context import FileContext

STARRED = ast.Starred()
WORD = re.compile(r"[A-Za-z_]\w*")


def parameter_position(scope: Scope, name: str) -> Optional[int]:
    """Index of ``name`` among the positional arguments a caller writes (``self`` excluded); -1 for
    keyword-only parameters; None for ``*args``/``**kwargs`` or an unknown name."""
    args = scope.node.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    if scope.self_name:
        positional = positional[1:]
    if name in positional:
        return positional.index(name)
    if name in [a.arg for a in args.kwonlyargs]:
        return -1
    return None


def argument_of(call: ast.Call, name: str, position: int):
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return STARRED
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if 0 <= position < len(call.args):
        return call.args[position]
    return None  # the default value


def call_sites(ctx: FileContext, scope: Scope) -> Iterator[tuple[Scope, Optional[ast.Call]]]:
    """(caller scope, call) for each use of the function's name; call None for a use that is not a call."""
    function = scope.node.name
    cls = scope.class_node
    if word_counts(ctx)[function] < 2:
        return  # the text names it only where it is defined (a cheap test before any walk)
    for caller, node in _uses(ctx).get((cls is not None, function), ()):
        if cls is not None:
            receiver, self_name = node.value, caller.self_name if caller.class_node is cls else None
            if not isinstance(receiver, ast.Name) or receiver.id != self_name and receiver.id not in _instances(ctx, caller, cls) \
                    and not _the_class(ctx, receiver, cls):
                continue  # another object's method of the same name
        parent = ctx.parent(node)
        yield caller, parent if isinstance(parent, ast.Call) and parent.func is node else None


def uses_of(ctx: FileContext, name: str) -> list[tuple[Scope, ast.AST]]:
    """Every ``Name`` and ``Attribute`` of the file spelling ``name``, with its scope."""
    return _uses(ctx).get((False, name), []) + _uses(ctx).get((True, name), [])


def _uses(ctx: FileContext) -> dict[tuple[bool, str], list[tuple[Scope, ast.AST]]]:
    """Every name (False, id) and attribute (True, attr) of the file, with its scope, in scope
    order: one walk, where looking for each function's uses anew was quadratic in the functions."""

    def compute() -> dict[tuple[bool, str], list[tuple[Scope, ast.AST]]]:
        uses: dict[tuple[bool, str], list[tuple[Scope, ast.AST]]] = {}
        for caller in scopes(ctx):
            for node in scope_nodes(caller):
                if isinstance(node, ast.Name):
                    uses.setdefault((False, node.id), []).append((caller, node))
                elif isinstance(node, ast.Attribute):
                    uses.setdefault((True, node.attr), []).append((caller, node))
        return uses

    return ctx.memo("retained_callers_uses", compute)


def _the_class(ctx: FileContext, receiver: ast.Name, cls: ast.ClassDef) -> bool:
    """``receiver`` is the class itself (``Trainer.evaluate(...)``: a static or class method): its
    name, which the file binds to no value."""
    return receiver.id == cls.name and receiver.id not in value_names(ctx)


def word_counts(ctx: FileContext) -> "collections.Counter[str]":
    """How often each identifier occurs in the file's text (one scan)."""
    return ctx.memo("word_counts", lambda: collections.Counter(WORD.findall(ctx.source)))


def mentioned_outside(ctx: FileContext, node: ast.FunctionDef) -> bool:
    """The function's name occurs as a word before its ``def`` line or after its end. The file's
    word counts answer a name found only in its own definition without searching the whole text
    once a function, which made a file of many functions quadratic."""
    start, end = ctx.offset(node.lineno, 0), ctx.offset(node.end_lineno, node.end_col_offset)
    if node.name.isascii() and word_counts(ctx)[node.name] == WORD.findall(ctx.source, start, end).count(node.name):
        return False  # each word of the name lies in the definition: none before or after it
    return bool(re.search(r"\b%s\b" % re.escape(node.name), ctx.source[:start] + ctx.source[end:]))


def _instances(ctx: FileContext, caller: Scope, cls: ast.ClassDef) -> set[str]:
    """Names bound to ``cls(...)`` in ``caller``."""

    def compute() -> set[str]:
        bindings = scope_assignments(ctx, caller)
        return {
            name
            for name, definitions in bindings.assignments.items()
            if definitions
            and all(isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == cls.name for _, v in definitions)
        }

    return ctx.memo(("instances", id(caller.node), id(cls)), compute)
