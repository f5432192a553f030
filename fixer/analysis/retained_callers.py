"""What this file's callers pass for a function's parameter.

``callers_pass_data(ctx, scope, name)`` is True when the function (or method) of ``scope`` is
called in this file, only by its name (never passed around as a value), and every call gives the
parameter ``name`` a value that carries no graph (a tensor built from data, a number, a leaf):
then nothing the caller keeps can share the graph the function builds on it. A method counts
calls through ``self`` in its class and through names bound to ``ClassName(...)``.
"""

from __future__ import annotations

import ast
import collections
import re
from typing import Iterator, Optional

from fixer.analysis.graph import Kind, facts
from fixer.analysis.importers import importer_calls, project_call_sites
from fixer.analysis.names import value_names
from fixer.analysis.callees import called_function
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.context import FileContext


def callers_pass_data(ctx: FileContext, scope: Scope, name: str) -> bool:
    return _callers(ctx, scope, name) == "data"


def callers_pass_graph(ctx: FileContext, scope: Scope, name: str) -> bool:
    """Some call in this file gives the parameter a value that certainly carries a graph."""
    return _callers(ctx, scope, name) == "graph"


def _callers(ctx: FileContext, scope: Scope, name: str) -> Optional[str]:
    """"data" when every call the project shows (this file's, the importing files') passes a
    value without a graph, "graph" when one passes a graph, None when unknown."""
    return ctx.memo(("retained_callers", id(scope.node), name), lambda: _verdict(ctx, scope, name))


def _verdict(ctx: FileContext, scope: Scope, name: str) -> Optional[str]:
    node = scope.node
    if isinstance(node, ast.Module):
        return None

    if not _mentioned_outside(ctx, node) and not importer_calls(ctx, scope):
        return None  # not mentioned outside its own definition, nor called by a file importing it
    position = parameter_position(scope, name)
    if position is None:
        return None
    kinds = []
    for own, caller, call in project_call_sites(ctx, scope):
        argument = argument_of(call, name, position) if call is not None else _STARRED
        if argument is _STARRED and call is not None:
            spread = _spread_kinds(own, caller, call)
            if spread is not None and not any(k.arg is None for k in call.keywords) and 0 <= position < len(spread):
                kinds.append(spread[position])
                continue
        if argument is None:
            continue  # the default value
        kinds.append(Kind.UNKNOWN if argument is _STARRED else facts(own, caller).kind(argument, call))
    if Kind.GRAPH in kinds:
        return "graph"
    if kinds and not node.decorator_list and all(k in (Kind.NONE, Kind.LEAF) for k in kinds):
        return "data"
    return None


_STARRED = ast.Starred()


def _mentioned_outside(ctx: FileContext, node: ast.FunctionDef) -> bool:
    """The function's name occurs as a word before its ``def`` line or after its end. The file's
    word counts answer a name found only in its own definition without searching the whole text
    once a function, which made a file of many functions quadratic."""
    start, end = ctx.offset(node.lineno, 0), ctx.offset(node.end_lineno, node.end_col_offset)
    if node.name.isascii() and word_counts(ctx)[node.name] == _WORD.findall(ctx.source, start, end).count(node.name):
        return False  # each word of the name lies in the definition: none before or after it
    return bool(re.search(r"\b%s\b" % re.escape(node.name), ctx.source[:start] + ctx.source[end:]))


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
        return _STARRED
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    if 0 <= position < len(call.args):
        return call.args[position]
    return None  # the default value


def _spread_kinds(ctx: FileContext, caller: Scope, call: ast.Call) -> Optional[list[Kind]]:
    """The kinds of the positional arguments a call passes, ``*`` spreads included when the file
    shows their elements (``f(*(a, b))``, ``f(*sample(6))`` of a function of this file whose every
    return is a tuple of one length); None otherwise."""
    graph = facts(ctx, caller)
    kinds: list[Kind] = []
    for arg in call.args:
        if not isinstance(arg, ast.Starred):
            kinds.append(graph.kind(arg, call))
        elif isinstance(arg.value, (ast.Tuple, ast.List)):
            kinds.extend(graph.kind(e, call) for e in arg.value.elts)
        elif isinstance(arg.value, ast.Call) and (callee := called_function(ctx, caller, arg.value.func, imported=False)):
            returns = [n for n in scope_nodes(callee) if isinstance(n, ast.Return)]
            lengths = {len(r.value.elts) if isinstance(r.value, ast.Tuple) else -1 for r in returns}
            if not returns or len(lengths) != 1 or -1 in lengths:
                return None
            inner = facts(ctx, callee)
            kinds.extend(max(inner.kind(r.value.elts[i], r) for r in returns) for i in range(lengths.pop()))
        else:
            return None
    return kinds


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


_WORD = re.compile(r"[A-Za-z_]\w*")


def _the_class(ctx: FileContext, receiver: ast.Name, cls: ast.ClassDef) -> bool:
    """``receiver`` is the class itself (``Trainer.evaluate(...)``: a static or class method): its
    name, which the file binds to no value."""
    return receiver.id == cls.name and receiver.id not in value_names(ctx)


def word_counts(ctx: FileContext) -> "collections.Counter[str]":
    """How often each identifier occurs in the file's text (one scan)."""
    return ctx.memo("word_counts", lambda: collections.Counter(_WORD.findall(ctx.source)))


def _instances(ctx: FileContext, caller: Scope, cls: ast.ClassDef) -> set[str]:
    """Names bound to ``cls(...)`` in ``caller``."""

    def compute() -> set[str]:
        graph = facts(ctx, caller)
        return {
            name
            for name, definitions in graph.assignments.items()
            if definitions
            and all(isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == cls.name for _, v in definitions)
        }

    return ctx.memo(("instances", id(caller.node), id(cls)), compute)
