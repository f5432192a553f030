"""Whether a function provably runs with gradient recording on.

Recording is on in a Python program unless something turns it off: ``torch.no_grad()``,
``inference_mode()``, ``set_grad_enabled(False)`` (as a block or a decorator). A function that
never switches the mode records gradients when every call of it that the project shows (one at
least) runs where recording is on: outside such a block, in module code, in a function whose
own backward shows recording (outside such a block), or in a function all of whose callers
record, a few calls up. A function whose callers are unknown (none seen, or it is passed on as a
value) gives no fact."""

from __future__ import annotations

import ast
import re

from fixer.analysis.calls import backward_calls
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.scopes import NESTED, Scope
from fixer.context import FileContext
from fixer.nodes import walk

GRAD_MODE_TEXT = re.compile(r"set_grad_enabled|inference_mode|no_grad|enable_grad|requires_grad_?")
CALLER_DEPTH = 3  # how many calls up the callers are followed


def switches_grad_mode(ctx: FileContext, scope: Scope) -> bool:
    """The function turns recording off or on itself (or names ``requires_grad``). (Memoised: asked
    of a function once per total it accumulates and once per caller followed.)"""
    if not ctx.mentions(scope.node, GRAD_MODE_TEXT):
        return False
    return ctx.memo(("switches_grad_mode", id(scope.node)), lambda: _names_grad_mode(scope))


def _names_grad_mode(scope: Scope) -> bool:
    # every node under the scope's own statements (a nested function's too when it sits in one of
    # them), each walked once: the subtrees of all the scope's nodes are those of its statements
    roots = [*(s for s in scope.body if not isinstance(s, NESTED)), *getattr(scope.node, "decorator_list", ())]
    return any(GRAD_MODE_TEXT.fullmatch(getattr(n, "attr", None) or getattr(n, "id", "") or "") for root in roots for n in walk(root))


def records_gradients(ctx: FileContext, scope: Scope, depth: int = CALLER_DEPTH) -> bool:
    """Whether every run of ``scope`` that the project shows records gradients (see the module)."""
    return ctx.memo(("records_gradients", id(scope.node), depth), lambda: _records(ctx, scope, depth))


def _records(ctx: FileContext, scope: Scope, depth: int) -> bool:
    if isinstance(scope.node, ast.Module):
        return not switches_grad_mode(ctx, scope)
    if depth < 0 or switches_grad_mode(ctx, scope):
        return False
    if any(not under_no_grad(ctx, call.node) for call in backward_calls(ctx, scope)):
        return True  # its own backward runs with recording on
    sites = list(project_call_sites(ctx, scope))
    return bool(sites) and all(
        call is not None and not under_no_grad(home, call) and records_gradients(home, caller, depth - 1)
        for home, caller, call in sites
    )
