"""Class models: per class of this file, which methods write each attribute of ``self``.

``attribute_writes(ctx, cls)`` maps an attribute name to its writes (``self.x = v``, ``self.x +=
v``, ``self.x: T = v``, ``del self.x``) in every method, each with its method, statement, value,
and whether it runs on every call of the method (top level of its body) and under ``no_grad``.
Computed once per class from the method scopes already indexed. ``init_parameter`` is the
parameter of ``__init__`` an attribute starts as (stored once, unconditionally, from the parameter
itself); ``constructor_field`` the same when no other write exists (it holds it for life);
``construction_argument`` the argument given for it where the file constructs the class."""

from __future__ import annotations

import ast
import collections
import re
from dataclasses import dataclass
from typing import Optional

from fixer.analysis.names import dotted
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.scopes import Scope, nodes_of, scopes, statement_index
from fixer.context import FileContext
from fixer.nodes import walk


@dataclass(frozen=True)
class Write:
    method: Scope
    stmt: ast.stmt
    value: Optional[ast.expr]  # None for ``del``
    every_call: bool  # a statement of the method's top-level body
    no_grad: bool


def class_methods(ctx: FileContext, cls: ast.ClassDef) -> dict[str, Scope]:
    return _methods_by_class(ctx).get(id(cls), {})


def _methods_by_class(ctx: FileContext) -> dict[int, dict[str, Scope]]:
    """Each class's methods with a ``self`` by name (a later definition wins), from one pass over
    the scopes instead of one a class."""
    def compute() -> dict[int, dict[str, Scope]]:
        found: dict[int, dict[str, Scope]] = {}
        for s in scopes(ctx):
            if s.class_node is not None and s.self_name:
                found.setdefault(id(s.class_node), {})[s.node.name] = s
        return found

    return ctx.memo("methods_by_class", compute)


def attribute_writes(ctx: FileContext, cls: ast.ClassDef) -> dict[str, list[Write]]:
    def compute() -> dict[str, list[Write]]:
        found: dict[str, list[Write]] = {}
        for method in class_methods(ctx, cls).values():
            top = set(map(id, method.node.body))
            for node in nodes_of(method, WRITING):
                for target, value in _targets(node):
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == method.self_name:
                        write = Write(method, node, value, id(node) in top, under_no_grad(ctx, node))
                        found.setdefault(target.attr, []).append(write)
        return found

    return ctx.memo(("attribute_writes", id(cls)), compute)


WRITING = frozenset({ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete})  # the statements ``_targets`` reads


def _targets(node: ast.AST) -> list[tuple[ast.expr, Optional[ast.expr]]]:
    if isinstance(node, ast.Assign):
        return [(t, node.value) for target in node.targets for t in _flat(target)]
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
        return [(node.target, node.value)]
    if isinstance(node, ast.Delete):
        return [(t, None) for t in node.targets]
    return []


def _flat(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for element in target.elts for t in _flat(element)]
    return [target.value] if isinstance(target, ast.Starred) else [target]


def constructor_field(ctx: FileContext, cls: ast.ClassDef, attr: str) -> Optional[str]:
    """The ``__init__`` parameter ``self.attr`` holds for the object's whole life."""
    return init_parameter(ctx, cls, attr) if len(attribute_writes(ctx, cls).get(attr, [])) == 1 else None


def init_parameter(ctx: FileContext, cls: ast.ClassDef, attr: str) -> Optional[str]:
    """The parameter ``__init__`` stores as ``self.attr``, once and unconditionally, unchanged."""
    writes = [w for w in attribute_writes(ctx, cls).get(attr, []) if w.method.node.name == "__init__"]
    if len(writes) != 1:
        return None
    write = writes[0]
    init = write.method.node
    if not write.every_call or not isinstance(write.stmt, ast.Assign):
        return None
    value = _element_for(write.stmt, attr)  # self.a, self.b = a, b: element by element
    if not isinstance(value, ast.Name):
        return None
    name = value.id
    args = init.args
    if name not in [a.arg for a in args.posonlyargs + args.args[1:] + args.kwonlyargs]:
        return None
    before = init.body[: init.body.index(write.stmt)]
    if any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for s in before for n in walk(s)):
        return None  # the parameter was rebound first
    return name


def _element_for(stmt: ast.Assign, attr: str) -> Optional[ast.expr]:
    """The value one plain assignment gives ``self.attr``, also as an element of a tuple assigned a tuple."""
    if len(stmt.targets) != 1:
        return None
    target, value = stmt.targets[0], stmt.value
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        pairs = [(t, v) for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Attribute) and t.attr == attr]
        return pairs[0][1] if len(pairs) == 1 else None
    return value


def construction_argument(ctx: FileContext, cls: ast.ClassDef, attr: str, for_life: bool = True) -> Optional[ast.expr]:
    """What ``self.attr`` holds (for life, or else from construction until a method rebinds it)
    when the class is constructed exactly once in this file, as ``x = Cls(...)``: the argument
    given for the parameter ``__init__`` stores."""
    param = (constructor_field if for_life else init_parameter)(ctx, cls, attr)
    sites = constructions(ctx, cls)
    if param is None or sites is None or len(sites) != 1:
        return None
    call = sites[0]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    init = class_methods(ctx, cls)["__init__"].node
    params = [a.arg for a in init.args.posonlyargs + init.args.args][1:]
    return (dict(zip(params, call.args)) | {k.arg: k.value for k in call.keywords}).get(param)


def constructions(ctx: FileContext, cls: ast.ClassDef) -> Optional[list[ast.Call]]:
    """Every ``Cls(...)`` of this file, if each is the value of an assignment; None if the name is
    used otherwise (passed on, subclassed, called elsewhere): then construction is not known."""
    def compute() -> Optional[list[ast.Call]]:
        calls = _assigned_calls(ctx).get(cls.name, [])
        if not calls or ctx.parent(cls) is not ctx.tree or sum(1 for c in statement_index(ctx).classes if c.name == cls.name) != 1:
            return None
        expected = len(calls) + 1  # the class statement and the constructions only
        if _text_mentions(ctx).get(cls.name, 0) != expected and _mentions(ctx).get(cls.name, 0) != expected:
            return None  # (the text first: the code's count is asked only where prose may add to it)
        return calls

    return ctx.memo(("constructions", id(cls)), compute)


def _name_matches(ctx: FileContext) -> list[tuple[int, str]]:
    """(offset, name) of each whole-word mention in the source text of a class of the file that an
    assignment constructs (one scan)."""
    def compute() -> list[tuple[int, str]]:
        names = {c.name for c in statement_index(ctx).classes} & _assigned_calls(ctx).keys()
        if not names:
            return []
        # the leading word boundary tested after each match: ``re`` tries a leading ``\b`` at every
        # character, but finds the names' first letters at once (a match inside a word never hides one)
        pattern, text = re.compile(r"(%s)\b" % "|".join(map(re.escape, sorted(names)))), ctx.source
        return [
            (m.start(), m.group(1)) for m in pattern.finditer(text)
            if not m.start() or not (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_")
        ]

    return ctx.memo("class_name_matches", compute)


def _text_mentions(ctx: FileContext) -> dict[str, int]:
    """How often the source text names each class of the file that an assignment constructs: an
    upper bound of ``_mentions``, equal to it where no docstring, comment or string names it."""
    return dict(collections.Counter(name for _, name in _name_matches(ctx)))


def _mentions(ctx: FileContext) -> dict[str, int]:
    """How often the code names each class of the file that an assignment constructs: the text's
    mentions less those in docstrings and on comment lines after the ``#`` (prose is no use of the
    class). A string elsewhere that names it (``__all__``, ``getattr(module, "Net")``, a message)
    still counts."""
    def compute() -> dict[str, int]:
        matches = _name_matches(ctx)
        if not matches:
            return {}
        text, spans = ctx.source, []
        holders = {id(n): n for n in [ctx.tree, *(scope.node for scope in scopes(ctx)), *statement_index(ctx).classes]}
        for node in holders.values():
            body = getattr(node, "body", None)
            first = body[0] if body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                spans.append(ctx.span(first.value))

        def prose(start: int) -> bool:
            before = text[text.rfind("\n", 0, start) + 1 : start]
            return any(a <= start < b for a, b in spans) or "#" in before and "'" not in before and '"' not in before

        counts = dict.fromkeys((name for _, name in matches), 0)
        for start, name in matches:
            counts[name] += 0 if prose(start) else 1
        return counts

    return ctx.memo("class_mentions", compute)


def _assigned_calls(ctx: FileContext) -> dict[str, list[ast.Call]]:
    """``x = Name(...)`` values of the file by the called name (one pass over its assignments)."""
    def compute() -> dict[str, list[ast.Call]]:
        found: dict[str, list[ast.Call]] = {}
        for a in statement_index(ctx).assigns:
            if isinstance(a.value, ast.Call) and isinstance(a.value.func, ast.Name):
                found.setdefault(a.value.func.id, []).append(a.value)
        return found

    return ctx.memo("assigned_calls", compute)


def written_only_in(ctx: FileContext, cls: ast.ClassDef, attr: str) -> bool:
    """No text outside the class stores to ``.attr`` (so ``self.attr`` elsewhere is another object's)."""
    return all(cls.lineno <= line <= cls.end_lineno for line in attribute_store_lines(ctx, attr))


def attribute_store_lines(ctx: FileContext, attr: str) -> list[int]:
    """The lines whose text stores to ``.attr`` (``x.attr = v``, ``x.attr += v``)."""
    return ctx.lines_matching(re.compile(r"\.%s\s*(?:[-+*/@%%|&^]|//|\*\*|<<|>>)?=(?!=)" % re.escape(attr)))


def held_for_life(ctx: FileContext) -> dict[str, str]:
    """``self.attr`` -> the dotted name the file's one construction of the class passes for it,
    for attributes the object keeps for life (``self.opt = opt`` given ``Trainer(opt)``), when only
    that class of the file writes ``self.attr`` (so the name says whose ``self`` it is)."""
    return ctx.memo("held_for_life", lambda: {field: dotted(given) for field, given in held_arguments(ctx).items()})


def held_arguments(ctx: FileContext) -> dict[str, ast.expr]:
    """``held_for_life``'s answers as the argument the construction passes, in its place in the
    file (a name read there is scoped there)."""
    def compute() -> dict[str, ast.expr]:
        found: dict[str, ast.expr] = {}
        constructed = _assigned_calls(ctx)
        for cls in statement_index(ctx).classes:  # only classes the file constructs: a cheap test first
            if cls.name not in constructed or constructions(ctx, cls) is None:
                continue
            for attr in attribute_writes(ctx, cls):
                given = construction_argument(ctx, cls, attr)
                name = dotted(given) if given is not None else None
                if name and not name.startswith("self.") and written_only_in(ctx, cls, attr):
                    found[f"self.{attr}"] = given
        return found

    return ctx.memo("held_arguments", compute)
