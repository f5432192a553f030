"""Repairs at the line where a value with a graph is stored (``stored in HOLDER`` in a finding):

- **detach where it crosses**: a tensor written into in place (``self.bank[c] = ...``,
  ``self.cache[:, a:b] = x``) keeps the history of every earlier write; ``bank = bank.detach()``
  just before the writes (before the loop that makes them) cuts the old iterations off and keeps
  this iteration's gradient;
- **detach at the store**: the stored value itself detached (``self.prev = out.detach()``; every
  value of a state written together, ``self.M, self.z = dM, dz``; a dict or list of tensors
  detached item by item just after the line that binds it);
- **stop caching**: a method that returns the value it stores (``self.cache = freqs; return
  freqs``) and, on a hit, what it stored (``return self.cache``) is a cache of a value built from
  trained parameters; without the store it computes the value afresh each call, as it does the
  first time (tried after detaching, which keeps the cache when the re-run proves nothing is lost);
- **a number at the store**: ``.item()`` where a running total or a list of losses is filled,
  for holders whose consumers only read numbers (a leak, GF301)."""

from __future__ import annotations

import ast
import re
from typing import Iterator, Optional

from fixer.context import FileContext
from fixer.edits.statements import insert_after, insert_before
from fixer.edits.values import method_edit
from fixer.nodes import walk
from fixer.rule import Edit
from fixer.runtime.report import Finding, Piece
from fixer.runtime.repair.cuts import mark_edit, marked
from fixer.runtime.repair.candidate import Candidate, candidate, context, enclosing_function, held_name, statement_at
from fixer.analysis.vocabulary import SEQUENCE_ADDS, SET_ADDS

_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _parts(holder: str) -> tuple[str, str]:
    """(the last name of the holder before its subscripts, the first subscript or ""):
    ``model.attn.cache_v`` -> ("cache_v", ""), ``state['deter']`` -> ("state", "['deter']")."""
    match = re.match(r"^(?:.*\.)?(\w+)((?:\[[^\]]*\])*)$", holder)
    return (match.group(1), match.group(2)) if match else ("", "")


def _names(node: ast.AST, name: str) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == name) or (isinstance(node, ast.Name) and node.id == name)


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        return [stmt.target]
    return []


def _stored_target(stmt: ast.stmt, name: str) -> Optional[ast.expr]:
    """The target (or tuple element) of ``stmt`` that stores into ``name``: the name itself or a subscript of it."""
    for target in _targets(stmt):
        for element in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
            base = element.value if isinstance(element, ast.Subscript) else element
            while isinstance(base, ast.Subscript):
                base = base.value
            if _names(base, name):
                return element
    return None


def _appended(stmt: ast.stmt, name: str) -> Optional[ast.expr]:
    """The value of ``name.append(value)`` (or extend, insert, add)."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        if isinstance(func, ast.Attribute) and func.attr in SEQUENCE_ADDS | SET_ADDS and _names(func.value, name) and stmt.value.args:
            return stmt.value.args[-1]
    return None


def stores(ctx: FileContext, piece: Piece) -> list[ast.stmt]:
    """The statements that fill the holder: the piece's own line when it stores into it, else
    the statements of the file storing into the holder's attribute through a subscript or a
    mutator (``self.sums[name] += value``: the line named is a call handing the value over)."""
    name, _ = _parts(held_name(piece))
    stmt = statement_at(ctx, piece.line)
    if not name or stmt is None:
        return []
    if _stored_target(stmt, name) is not None or _appended(stmt, name) is not None:
        return [stmt]
    found = [
        n for n in walk(ctx.tree) if isinstance(n, ast.stmt)
        and (isinstance(_stored_target(n, name), ast.Subscript) or isinstance(n, ast.AugAssign) and _stored_target(n, name) is not None
             or _appended(n, name) is not None)
    ]
    return found[:2]


def _outermost_loop(ctx: FileContext, stmt: ast.stmt) -> ast.stmt:
    """The outermost loop around ``stmt`` inside its own function, else ``stmt``."""
    function, outer = enclosing_function(ctx, stmt), stmt
    for parent in ctx.ancestors(stmt):
        if parent is function:
            break
        if isinstance(parent, _LOOPS):
            outer = parent
    return outer


def crossing_detach(ctx: FileContext, stmt: ast.stmt, name: str, finding: Finding) -> Optional[Candidate]:
    """``base = base.detach()`` before the in-place writes into ``base``."""
    target = _stored_target(stmt, name)
    if not isinstance(target, ast.Subscript):
        return None
    base = target.value
    while isinstance(base, ast.Subscript):
        base = base.value
    text = ctx.text(base)
    where = _outermost_loop(ctx, stmt)
    edit = insert_before(ctx, where, f"{text} = {text}.detach()")
    probe = [insert_before(ctx, where, f"{text} = {marked(text)}")]
    return candidate(f"detach `{text}` where it crosses into the next iteration (before line {where.lineno})", ctx, [edit], finding, probe)


def _value_of(stmt: ast.stmt, target: ast.expr) -> Optional[ast.expr]:
    """The expression ``stmt`` stores into ``target``: the matching element of a tuple on both sides."""
    if isinstance(stmt, ast.AugAssign):
        return stmt.value
    value = getattr(stmt, "value", None)
    for whole in _targets(stmt):
        if whole is target:
            return value
        if isinstance(whole, (ast.Tuple, ast.List)) and target in whole.elts:
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(whole.elts):
                return value.elts[whole.elts.index(target)]
            return None  # unpacked from one call: detached after the line
    return value


def buffer_of_its_class(ctx: FileContext, stmt: ast.stmt, target: Optional[ast.expr]) -> bool:
    """``self.NAME = ...`` in a class that registers NAME as a buffer (``register_buffer("NAME",
    ...)``): module state that no optimizer trains, which PyTorch's own layers update without
    autograd; detaching what is stored there needs no probe."""
    if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
        return False
    klass = next((p for p in ctx.ancestors(stmt) if isinstance(p, ast.ClassDef)), None)
    return klass is not None and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "register_buffer"
        and n.args and isinstance(n.args[0], ast.Constant) and n.args[0].value == target.attr
        for n in walk(klass)
    )


def store_fix(ctx: FileContext, stmt: ast.stmt, piece: Piece, finding: Finding, method: str) -> Optional[Candidate]:
    """``value.detach()`` (or ``.item()``) where ``stmt`` stores it into the holder."""
    name, subscript = _parts(held_name(piece))
    target = _stored_target(stmt, name)
    value = _appended(stmt, name) if target is None else _value_of(stmt, target)
    what = "a number" if method == "item" else "detached"
    if value is not None:
        probe = None if buffer_of_its_class(ctx, stmt, target) else [mark_edit(ctx, value)]
        return candidate(f"store {what} at line {stmt.lineno}", ctx, [method_edit(ctx, value, method)], finding, probe)
    if target is None or method != "detach" or isinstance(target, ast.Subscript):
        return None
    text = ctx.text(target)
    if subscript.startswith("['") or subscript.startswith('["'):
        rebuilt = f"{{key: item.detach() for key, item in {text}.items()}}"
    elif subscript:
        rebuilt = f"type({text})(item.detach() for item in {text})"
    else:
        rebuilt = f"{text}.detach()"
    probe = [insert_after(ctx, stmt, f"{text} = {marked(text)}")]
    return candidate(f"detach `{text}` after line {stmt.lineno} binds it", ctx, [insert_after(ctx, stmt, f"{text} = {rebuilt}")], finding, probe)


def together(ctx: FileContext, stmt: ast.stmt, name: str, finding: Finding) -> Optional[Candidate]:
    """Every value of a tuple assignment detached (``self.M, self.z = dM, dz``): a state written
    together; unpacked from one value (``self.state.h, self.state.c = hc``), the fields of the
    holder's object that it binds, detached just after the line."""
    target = _stored_target(stmt, name)
    whole = next((t for t in _targets(stmt) if isinstance(t, (ast.Tuple, ast.List)) and target in t.elts), None)
    value = getattr(stmt, "value", None)
    if whole is None:
        return None
    if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(whole.elts):
        edits = [method_edit(ctx, v, "detach") for v in value.elts]
        return candidate(f"store every value of line {stmt.lineno} detached", ctx, edits, finding, [mark_edit(ctx, v) for v in value.elts])
    owner = ctx.text(target.value) if isinstance(target, ast.Attribute) else None
    fields = [ctx.text(e) for e in whole.elts if isinstance(e, ast.Attribute) and ctx.text(e.value) == owner]
    if len(fields) < 2:
        return None  # (one field: store_fix detaches it)
    rebind = lambda wrap: insert_after(ctx, stmt, f"{', '.join(fields)} = {', '.join(wrap(f) for f in fields)}")  # noqa: E731
    names = ", ".join(f"`{f}`" for f in fields)
    return candidate(f"detach {names} after line {stmt.lineno} binds them", ctx, [rebind(lambda f: f"{f}.detach()")], finding, [rebind(marked)])


def uncache(ctx: FileContext, stmt: ast.stmt, name: str, finding: Finding) -> Optional[Candidate]:
    """``self.cache = value`` dropped (``pass`` when it is alone in its block) in a method that
    returns ``value`` and, elsewhere, the attribute itself."""
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Attribute):
        return None
    if stmt.targets[0].attr != name or not isinstance(stmt.value, ast.Name):
        return None
    returns = [n.value for n in walk(enclosing_function(ctx, stmt)) if isinstance(n, ast.Return) and n.value is not None]
    hit = any(_names(b, name) for r in returns for b in walk(r) if isinstance(b, ast.Attribute))
    computed = any(isinstance(r, ast.Name) and r.id == stmt.value.id for r in returns)
    if not (hit and computed):
        return None
    body = next((getattr(p, f) for p in [ctx.parent(stmt)] for f in ("body", "orelse") if stmt in getattr(p, f, [])), [])
    start, end = ctx.line_start(stmt.lineno), ctx.line_end(stmt.end_lineno or stmt.lineno)
    text = f"{ctx.indent_of(stmt.lineno)}pass{ctx.newline}" if len(body) == 1 else ""
    return candidate(f"stop caching `{ctx.text(stmt.targets[0])}` (line {stmt.lineno})", ctx, [Edit(start, end, text)], finding)


def store_repairs(finding: Finding, piece: Piece, methods: tuple[str, ...]) -> Iterator[Candidate]:
    """The repairs at one store, in the order given: "crossing", "detach", "uncache", "item"."""
    ctx = context(piece.filename)
    if ctx is None:
        return
    name, _ = _parts(held_name(piece))
    for stmt in stores(ctx, piece):
        for method in methods:
            if method == "crossing":
                found = [crossing_detach(ctx, stmt, name, finding)]
            elif method == "uncache":
                found = [uncache(ctx, stmt, name, finding)]
            else:
                found = ([together(ctx, stmt, name, finding)] if method == "detach" else []) + [store_fix(ctx, stmt, piece, finding, method)]
            yield from (f for f in found if f is not None)
