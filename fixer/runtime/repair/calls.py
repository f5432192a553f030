"""Repairs of one backward or ``grad`` call's keywords: drop a ``retain_graph`` whose graph no
backward walks again (GF302); ``create_graph=True`` on a ``grad`` call whose result enters the
loss (GF107), its ``retain_graph=True`` dropped (create_graph keeps the graph). Where the ``grad``
call passes a parameter of its function on as the flag (``create_graph=differentiable``), the
flag is the caller's: the calls the run saw lead there (the finding's "called from" evidence) are
followed up, through each that passes its own parameter on, to the first that leaves it off or
gives it ``False``, where it is turned on (``differentiable=True``)."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.edits.keywords import flag_on_edit, keyword_edit, remove_keyword
from fixer.nodes import walk
from fixer.rule import Edit
from fixer.runtime.report import Finding, Piece
from fixer.runtime.repair.candidate import Candidate, candidate, context, enclosing_function, pieces, statement_at


def _calls(piece: Piece, keyword: str, present: bool):
    ctx = context(piece.filename)
    stmt = statement_at(ctx, piece.line) if ctx is not None else None
    if stmt is None:
        return ctx, []
    calls = [n for n in walk(stmt) if isinstance(n, ast.Call) and any(k.arg == keyword for k in n.keywords) == present]
    return ctx, calls


def drop_retain(finding: Finding, piece: Piece) -> Iterator[Candidate]:
    ctx, calls = _calls(piece, "retain_graph", True)
    if calls:
        found = candidate(f"drop retain_graph at line {piece.line}", ctx, [remove_keyword(ctx, calls[0], "retain_graph")], finding)
        if found is not None:
            yield found


def create_graph(finding: Finding, piece: Piece) -> Iterator[Candidate]:
    ctx, calls = _calls(piece, "create_graph", False)
    calls = [c for c in calls if _name(c.func) == "grad"]
    if not calls:
        yield from _flag_of_caller(finding, piece)
        return
    call = calls[0]
    retain = next((k for k in call.keywords if k.arg == "retain_graph"), None)
    if retain is not None:
        edits = [Edit(*ctx.span(retain), "create_graph=True")]
    else:
        edits = [keyword_edit(ctx, call, "create_graph")]
    found = candidate(f"create_graph=True at line {piece.line}", ctx, edits, finding)
    if found is not None:
        yield found


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _flag_of_caller(finding: Finding, piece: Piece) -> Iterator[Candidate]:
    ctx, calls = _calls(piece, "create_graph", True)
    call = next((c for c in calls if _name(c.func) == "grad"), None)
    flag = next((k.value for k in call.keywords if k.arg == "create_graph"), None) if call is not None else None
    function = enclosing_function(ctx, call) if isinstance(flag, ast.Name) else None
    for caller in pieces(finding, "called from"):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or flag.id not in _parameters(function):
            return
        here = context(caller.filename)
        stmt = statement_at(here, caller.line) if here is not None else None
        site = next((n for n in walk(stmt) if isinstance(n, ast.Call) and _name(n.func) == function.name), None) if stmt else None
        if site is None:
            return
        given = _argument(site, function, flag.id)
        if isinstance(given, ast.Name):  # passed on from the caller's own parameter: its caller decides
            flag, function = given, enclosing_function(here, site)
            continue
        if given is None or isinstance(given, ast.Constant) and not given.value:
            title = f"pass {flag.id}=True at line {caller.line} (the flag the create_graph of line {piece.line} is given)"
            found = candidate(title, here, [flag_on_edit(here, site, flag.id, given if given is not None else site)], finding)
            if found is not None:
                yield found
        return


def _parameters(function: ast.AST) -> list[str]:
    args = function.args
    return [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]


def _argument(call: ast.Call, function: ast.AST, parameter: str) -> Optional[ast.expr]:
    """What ``call`` gives ``parameter`` of ``function`` (None: nothing, its default applies)."""
    keyword = next((k.value for k in call.keywords if k.arg == parameter), None)
    if keyword is not None:
        return keyword
    positional = [a.arg for a in function.args.posonlyargs + function.args.args]
    if positional and positional[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        positional = positional[1:]
    index = positional.index(parameter) if parameter in positional else None
    return call.args[index] if index is not None and index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]) else None
