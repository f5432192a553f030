"""Can anything walk a helper's backward graph again, when the graph comes from its callers?

``walked_again_through_callers(ctx, scope, call)`` extends ``retained_walks.walked_again`` to a
backward on a parameter (``def _backprop(self, loss): loss.backward(...)``): the graph is each
caller's, so it is proven walked once only when the helper reads the parameter nowhere else but
for numbers, runs no other backward and no higher-order gradient, and at every call the project
makes, in any file (all of them known: the helper's name is used only by calls this analysis attributes) the
argument's graph is itself walked by nothing after the call (``walked_again`` at the caller, with
the call in the place of the backward). Otherwise the reason it may be, as ``walked_again``."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.arguments import bound_arguments
from fixer.analysis.call_sites import word_counts
from fixer.analysis.calls import BackwardCall, backward_calls
from fixer.analysis.importers import class_importers
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.plain_numbers import parameters
from fixer.analysis.retained_walks import read_for_numbers, walked_again
from fixer.analysis.names import dotted
from fixer.analysis.scopes import Scope, scope_nodes
from fixer.context import FileContext
from fixer.nodes import walk

MAX_DEPTH = 3  # helpers handing the graph to helpers, followed this deep


def walked_again_through_callers(ctx: FileContext, scope: Scope, call: BackwardCall, depth: int = 0) -> Optional[str]:
    reason = walked_again(ctx, scope, call)
    param = call.target.id if isinstance(call.target, ast.Name) and call.target.id in parameters(scope) else None
    if reason is None or param is None or depth >= MAX_DEPTH or call.kind != "method":
        return reason
    if not _walked_only_here(ctx, scope, call, param):
        return reason
    sites = _all_calls(ctx, scope)
    if not sites:
        return reason
    for own, caller, site in sites:
        given = dict(bound_arguments(scope, site)).get(param)
        if given is None or any(isinstance(a, ast.Starred) for a in site.args) or any(k.arg is None for k in site.keywords):
            return reason
        if _unchecked_backward_calls(own, caller, site):
            return f"line {site.lineno}'s caller calls another function that may backpropagate"
        found = walked_again_through_callers(own, caller, BackwardCall(site, given, call.kind), depth + 1)
        if found is not None:
            return f"the graph given at line {site.lineno}: {found}"
    return None


def _walked_only_here(ctx: FileContext, scope: Scope, call: BackwardCall, param: str) -> bool:
    """The helper binds ``param`` once (as a parameter), reads it only as this backward's target
    or for numbers, and runs no other backward and no ``create_graph``."""
    if len(backward_calls(ctx, scope)) != 1 or any(k.arg == "create_graph" for k in call.node.keywords):
        return False
    for node in walk(scope.node):
        if isinstance(node, ast.Name) and node.id == param and node is not call.target:
            if not isinstance(node.ctx, ast.Load) or not read_for_numbers(ctx, node):
                return False
    return True


def _unchecked_backward_calls(ctx: FileContext, caller: Scope, site: ast.Call) -> bool:
    """The caller calls, besides ``site``, a function spelled like a backward that is not a
    backward call the analysis checks (``self.do_backward(other_loss)``): ``walked_again`` lets
    such calls pass as checked ones, which they are not here."""
    checked = {id(b.node) for b in backward_calls(ctx, caller)} | {id(site)}
    return any(
        isinstance(n, ast.Call) and id(n) not in checked and (dotted(n.func) or "").endswith(("backward", ".grad"))
        for n in scope_nodes(caller)
    )


def _all_calls(ctx: FileContext, scope: Scope) -> list[tuple[FileContext, Scope, ast.Call]]:
    """Every call of the helper in the project (``importers.project_call_sites``: this file and the
    files importing its module), as (file, caller, call), when each use of the name is such a call:
    a function's every use there is one; a method's name is mentioned, in this file and in each
    file importing its class, only by the calls attributed to it."""
    sites = list(project_call_sites(ctx, scope))
    if not sites or any(site is None for _, _, site in sites):
        return []
    cls, name = scope.class_node, scope.node.name
    for own in [ctx, *class_importers(ctx, cls)] if cls is not None else []:
        if word_counts(own)[name] != sum(1 for other, _, _ in sites if other is own) + (own is ctx):
            return []  # a mention that is not a call we attribute: another caller may hide there
    return sites
