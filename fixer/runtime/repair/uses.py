"""Repairs where a value is used again after its graph was freed:

- **detach at the input**: a generator's output fed to the discriminator's loss, where the run saw
  it enter that loss (an argument, a field, a pool's loop): ``netD(fake.detach())``; one candidate
  per value the line hands on, in the order written, then each item of it (a list of fakes kept
  by a history); a value without a graph changes nothing and is refused. Never where it is used again: that may be the generator's own loss;
- **convert where it is handed on**: a value handed to a call that keeps it (GF301, the store is
  in the callee), as numbers or detached right there;
- **recompute before the use**: the statement that built (and stored) the value, repeated just
  before the line that uses it again (a value built once before the loop, or before a step
  changed its parameters), with the band-aid ``retain_graph=True`` of the failing backward
  dropped, which the fresh graph no longer needs."""

from __future__ import annotations

import ast
import builtins
from typing import Iterator, Optional

from fixer.edits.keywords import remove_keyword
from fixer.edits.statements import insert_before
from fixer.edits.values import detach_edit, replace_edit
from fixer.nodes import walk
from fixer.runtime.report import Finding, Piece
from fixer.runtime.repair.cuts import mark_edit
from fixer.runtime.repair.effects import side_effect
from fixer.runtime.repair.candidate import Candidate, candidate, context, enclosing_function, statement_at

_VALUES = (ast.Name, ast.Attribute, ast.Subscript)
INPUTS = 4  # values of one line tried at most


def _inputs(stmt: ast.stmt) -> list[ast.expr]:
    """What the line hands on: a loop's iterable, the arguments of its calls (names, fields, items)."""
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter] if isinstance(stmt.iter, _VALUES) else []
    found = []
    for node in walk(stmt):
        if isinstance(node, ast.Call):
            arguments = [*node.args, *(k.value for k in node.keywords)]
            arguments += [e for a in arguments if isinstance(a, (ast.List, ast.Tuple)) for e in a.elts]  # torch.cat([real, fake])
            found += [a for a in arguments if isinstance(a, _VALUES)]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def detach_inputs(finding: Finding, piece: Piece) -> Iterator[Candidate]:
    ctx = context(piece.filename)
    stmt = statement_at(ctx, piece.line) if ctx is not None else None
    if stmt is None:
        return
    seen = set()
    for value in _inputs(stmt):
        text = ctx.text(value)
        if text in seen or len(seen) == INPUTS:
            continue
        seen.add(text)
        where = f"where line {piece.line} hands it on"
        probe = [mark_edit(ctx, value)]
        yield from filter(None, (
            candidate(f"detach `{text}` {where}", ctx, [detach_edit(ctx, value)], finding, probe),
            candidate(f"detach each item of `{text}` {where}", ctx, [replace_edit(ctx, value, f"[item.detach() for item in {text}]")], finding, probe),
        ))


def handed_on(finding: Finding, piece: Piece, method: str) -> Iterator[Candidate]:
    """Each value the line hands on (a call whose callee, perhaps in another file or reached by
    name, stores what it is given: ``self._call("end_batch", output)``) converted where it is
    handed: ``.item()`` or ``.detach()`` on it, on each value of a dict, on each item of a list;
    the re-run refuses the forms that do not fit the value."""
    ctx = context(piece.filename)
    stmt = statement_at(ctx, piece.line) if ctx is not None else None
    what = "numbers" if method == "item" else "detached"
    for value in _inputs(stmt)[:INPUTS] if stmt is not None else []:
        text = ctx.text(value)
        forms = (f"{{key: item.{method}() for key, item in {text}.items()}}", f"[item.{method}() for item in {text}]", f"{text}.{method}()")
        for form in forms:
            found = candidate(f"hand `{text}` on as {what} at line {piece.line} (`{form}`)", ctx, [replace_edit(ctx, value, form)], finding, [mark_edit(ctx, value)])
            if found is not None:
                yield found


def _retain_keyword(ctx, line: int) -> Optional[ast.Call]:
    stmt = statement_at(ctx, line)
    calls = [n for n in walk(stmt) if isinstance(n, ast.Call) and any(k.arg == "retain_graph" for k in n.keywords)] if stmt else []
    return calls[0] if calls else None


def _names_visible(ctx, value: ast.expr, use: ast.stmt) -> bool:
    """Every name ``value`` reads is bound where ``use`` runs: its function's parameters and
    assignments, the module's names, or a builtin."""
    function = enclosing_function(ctx, use)
    bound = set(dir(builtins)) | _bound(ctx.tree, module=True) | (_bound(function) if function is not ctx.tree else set())
    return all(n.id in bound for n in walk(value) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))


def _bound(scope: ast.AST, module: bool = False) -> set[str]:
    """The names a function (or, ``module``, the module's top level) binds."""
    names = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        arguments = scope.args
        names |= {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
        names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    if module:  # the top level's own statements, not the bodies of its functions and classes
        nodes = [n for stmt in scope.body for n in ([stmt] if isinstance(stmt, definitions) else walk(stmt))]
    else:
        nodes = list(walk(scope))
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, definitions):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def recompute_before_use(finding: Finding, stored: Piece, used: Piece, failed: Optional[Piece]) -> Iterator[Candidate]:
    """The storing statement repeated before the use, with the failing backward's
    ``retain_graph`` dropped (when it has one), then without dropping it."""
    if stored.filename != used.filename:
        return
    ctx = context(used.filename)
    if ctx is None:
        return
    store, use = statement_at(ctx, stored.line), statement_at(ctx, used.line)
    if not isinstance(store, ast.Assign) or use is None or store is use or store.lineno != store.end_lineno:
        return
    if len(store.targets) != 1 or not isinstance(store.targets[0], (ast.Name, ast.Attribute)):
        return
    if use.lineno <= store.end_lineno and use.end_lineno >= store.lineno:
        return  # the use contains the store (or is it)
    target = ctx.text(store.targets[0])
    if any(ctx.text(n) == target for n in walk(store.value) if isinstance(n, (ast.Name, ast.Attribute))):
        return  # ``self.M = self.M + delta``: a state updated from itself, not a value built afresh
    if not _names_visible(ctx, store.value, use) or side_effect(ctx, store) is not None:
        return  # (a statement that draws random numbers, or changes state, is no recompute)
    repeat = insert_before(ctx, use, ctx.text(store))
    title = f"recompute `{ctx.text(store.targets[0])}` before line {used.line} (repeat line {stored.line})"
    call = _retain_keyword(ctx, failed.line) if failed is not None and failed.filename == used.filename else None
    if call is not None:
        found = candidate(f"{title}, and drop retain_graph at line {failed.line}", ctx, [repeat, remove_keyword(ctx, call, "retain_graph")], finding)
        if found is not None:
            yield found
    found = candidate(title, ctx, [repeat], finding)
    if found is not None:
        yield found
