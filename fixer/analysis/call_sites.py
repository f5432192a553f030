"""Where this file uses a function or method, and what a call passes for a parameter: the call
sites (``call_sites``: a method's through ``self``, through names bound to ``ClassName(...)`` and
through the class itself), a parameter's position and the argument a call gives it
(``parameter_position``, ``argument_of``; ``STARRED`` when a ``*``/``**`` hides it), and the
cheap word tests from the file's text (``word_counts``, ``mentioned_outside``)."""

from __future__ import annotations

import ast
import collections
import os
import re
from typing import Iterator, Optional

from fixer.analysis.assignments import scope_assignments
from fixer.analysis.imported_calls import function_calls
from fixer.analysis.imported_definitions import imported_class
from fixer.analysis.names import qualified, value_names
from fixer.analysis.class_model import attribute_writes, construction_argument, written_only_in
from fixer.analysis.scopes import NAMES, Scope, nodes_of, scope_of, scopes, statement_index
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
            if isinstance(receiver, ast.Attribute) and field_instance(ctx, caller, receiver, cls):
                pass  # self.tracker.record(...): the field holds an instance of the class for life
            elif not isinstance(receiver, ast.Name) or receiver.id != self_name and not holds_instance(ctx, caller, receiver.id, cls) \
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
            for node in nodes_of(caller, NAMES):
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
            if definitions and all(_constructs(v, cls) for _, v in definitions)
        }

    return ctx.memo(("instances", id(caller.node), id(cls)), compute)


def holds_instance(ctx: FileContext, scope: Scope, name: str, cls: ast.ClassDef) -> bool:
    """``name`` holds an instance of ``cls`` in ``scope``: bound only to ``cls(...)`` there, or a
    parameter every call passes one (``instance_parameters``, asked only of parameters)."""
    if name in _instances(ctx, scope, cls):
        return True
    args = getattr(scope.node, "args", None)
    return args is not None and name in {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} \
        and name in instance_parameters(ctx, scope, cls)


def _constructs(value: Optional[ast.expr], cls: ast.ClassDef) -> bool:
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == cls.name


def instance_parameters(ctx: FileContext, function: Scope, cls: ast.ClassDef, home: Optional[FileContext] = None) -> frozenset[str]:
    """Parameters of a plain function (``train_step(model, meter)``) that hold an instance of
    ``cls`` (of file ``home``, this one unless given) on every call: the function is called (never
    only named) in this file and in the files importing it (``imported_calls.function_calls``: each
    call judged in its file), every call passes ``cls(...)``, a name its caller binds only to
    ``cls(...)`` (or that is itself such a parameter) or the ``self`` of a method of ``cls``, and
    the function never rebinds the parameter. Empty when any call is unknown, and on recursion (a
    function asked again while its answer is computed)."""
    if not isinstance(function.node, (ast.FunctionDef, ast.AsyncFunctionDef)) or function.class_node is not None:
        return frozenset()
    computing = ("instance_parameters: computing", id(function.node), id(cls))
    if computing in ctx.cache:
        return frozenset()  # recursion: don't know

    def compute() -> frozenset[str]:
        ctx.cache[computing] = True
        try:
            return frozenset(_held_parameters(ctx, function, cls, home or ctx))
        finally:
            del ctx.cache[computing]

    return ctx.memo(("instance_parameters", id(function.node), id(cls)), compute)


def function_call_sites(ctx: FileContext, function: Scope) -> list[tuple[FileContext, Scope, Optional[ast.Call]]]:
    """(caller's file, caller, call or None for a use that is no call) for each use of a plain
    function in this file and each call of it in the files importing it."""
    sites = [(ctx, caller, call) for caller, call in call_sites(ctx, function)]
    return sites + [(c.ctx, c.scope, c.call) for c in function_calls(ctx, function)]  # the importing files' calls


def _held_parameters(ctx: FileContext, function: Scope, cls: ast.ClassDef, home: FileContext) -> Iterator[str]:
    args = function.node.args
    rebound = scope_assignments(ctx, function).assignments
    sites = function_call_sites(ctx, function)
    if not sites or any(call is None for _, _, call in sites):
        return
    for name in [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]:
        position = parameter_position(function, name)
        if rebound.get(name) or position is None:
            continue
        if all(given_instance(own, caller, argument_of(call, name, position), home, cls) for own, caller, call in sites):
            yield name


def given_instance(own: FileContext, scope: Scope, value, ctx: FileContext, cls: ast.ClassDef) -> bool:
    """``value`` (read in ``scope`` of file ``own``) holds an instance of ``cls`` of file ``ctx``: in
    the class's file ``cls(...)``, a name holding one or the ``self`` of a method of ``cls``; in
    another file, a construction its imports resolve to the class, or a name every binding of the
    scope gives one."""
    if own is ctx:
        return _constructs(value, cls) or isinstance(value, ast.Name) and (holds_instance(ctx, scope, value.id, cls) or _own_self(scope, value, cls))
    if isinstance(value, ast.Name):
        values = [v for _, v in scope_assignments(own, scope).assignments.get(value.id, [])]
        return bool(values) and all(isinstance(v, ast.Call) and given_instance(own, scope, v, ctx, cls) for v in values)
    found = imported_class(own, qualified(own, value.func) or "") if isinstance(value, ast.Call) else None
    return found is not None and found[1].name == cls.name and os.path.abspath(found[0].path) == os.path.abspath(ctx.path)


def field_instance(ctx: FileContext, method: Scope, receiver: ast.expr, cls: ast.ClassDef) -> bool:
    """``receiver`` is ``self.attr`` holding (``life_field``) ``cls(...)``, a name bound only to
    one or the ``self`` of a method of ``cls`` (``Helper(self)``), or set once to ``cls(...)`` by
    ``__init__`` (``init_field``)."""
    if init_field(ctx, method, receiver) and _constructs(attribute_writes(ctx, method.class_node)[receiver.attr][0].value, cls):
        return True
    given = life_field(ctx, method, receiver)
    if given is None or _constructs(given, cls):
        return given is not None
    home = scope_of(ctx, given) if isinstance(given, ast.Name) else None
    return home is not None and (holds_instance(ctx, home, given.id, cls) or _own_self(home, given, cls))


def life_field(ctx: FileContext, method: Scope, receiver: ast.expr) -> Optional[ast.expr]:
    """What ``self.attr`` (``receiver``, in a method) holds for the object's whole life: the
    argument the class's one construction gives the parameter ``__init__`` stores there once,
    when nothing outside the class stores ``.attr`` (``class_model.construction_argument``)."""
    if not (isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name) and method.self_name
            and receiver.value.id == method.self_name and method.class_node is not None):
        return None
    if not written_only_in(ctx, method.class_node, receiver.attr):
        return None
    return construction_argument(ctx, method.class_node, receiver.attr)


def init_field(ctx: FileContext, method: Scope, receiver: ast.expr) -> bool:
    """``self.attr`` (``receiver``, in a method) is set once by ``__init__`` and stored nowhere else
    (``self.meter = Meter()``): the same object for the whole life of ``self``."""
    if not (isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name) and method.self_name
            and receiver.value.id == method.self_name and method.class_node is not None):
        return False
    writes = attribute_writes(ctx, method.class_node).get(receiver.attr, [])
    return len(writes) == 1 and writes[0].method.node.name == "__init__" and writes[0].every_call \
        and written_only_in(ctx, method.class_node, receiver.attr)


def _own_self(method: Scope, value: ast.Name, cls: ast.ClassDef) -> bool:
    """``value`` is the ``self`` of a method of ``cls`` (``train_step(self, batch)`` in ``fit``)."""
    return method.class_node is cls and method.self_name is not None and value.id == method.self_name


def path_instance(ctx: FileContext, scope: Scope, prefix: str) -> Optional[ast.ClassDef]:
    """The class of this file whose instance ``prefix`` holds in ``scope``: a name bound only to
    ``Cls(...)`` or a parameter every call passes one (``holds_instance``), or a field ``self.x``
    its class's construction gives one (the constructing method's own ``self`` included)."""
    classes = [c for c in statement_index(ctx).classes if ctx.parent(c) is ctx.tree]
    root, _, field = prefix.partition(".")
    if "." in field or field and root != scope.self_name:
        return None
    if not field:
        found = [c for c in classes if holds_instance(ctx, scope, root, c)]
        return found[0] if len(found) == 1 else None
    given = life_field(ctx, scope, ast.Attribute(value=ast.Name(id=root, ctx=ast.Load()), attr=field, ctx=ast.Load()))
    if not isinstance(given, ast.Name):
        return None
    home = scope_of(ctx, given)
    if home.class_node is not None and given.id == home.self_name:
        return home.class_node  # Helper(self) inside a method: the caller's class
    found = [c for c in classes if holds_instance(ctx, home, given.id, c)]
    return found[0] if len(found) == 1 else None
