"""Protocol events that happen inside a function the training loop calls.

``train_step(model, optimizer, x, y)`` whose body runs ``loss.backward()`` and
``optimizer.step()`` puts a backward and a step into every pass of the loop. ``call_events``
gives the callee's own events (its top-level block, recursively through the helpers it calls)
with their owners renamed into the caller's terms: a parameter becomes the argument passed for it
(``opt`` -> ``optimizer``), the callee's ``self`` becomes the receiver (``self.optimizer`` ->
``trainer.optimizer``), a global of the caller's own file stays itself. An owner that has no name
in the caller (a global of another file, a local of the callee) makes the whole call unknown
(None): its events are not guessed."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Optional

from fixer.analysis.bindings import imported_names
from fixer.analysis.carried import object_class
from fixer.analysis.graph import facts
from fixer.analysis.held_values import held_attribute
from fixer.analysis.names import dotted, qualified
from fixer.analysis.callees import called_function, instance_class
from fixer.analysis.imported_definitions import imported_definition_matches
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.context import FileContext

MAX_DEPTH = 2
PROTOCOL_TEXT = re.compile(rb"zero_grad|\.step\s*\(|backward\s*\(")


@dataclass(frozen=True)
class CalleeEvent:
    kind: str  # "backward", "zero_grad", "step"
    owner: Optional[str]  # in the caller's names
    call: ast.Call  # the callee's own call (in the callee's file)
    conditional: bool  # runs only sometimes within the callee
    spelling: str


def call_events(ctx: FileContext, scope: Scope, call: ast.Call, depth: int = 0) -> Optional[list[CalleeEvent]]:
    """The events of one call of a project function, or None when unknown or it has none."""
    if depth >= MAX_DEPTH:
        return None
    key = ("call_events", id(call), depth)
    return ctx.memo(key, lambda: _compute(ctx, scope, call, depth))


def _compute(ctx: FileContext, scope: Scope, call: ast.Call, depth: int) -> Optional[list[CalleeEvent]]:
    from fixer.analysis.protocol import block_events  # protocol imports this module

    name = qualified(ctx, call.func) or ""
    if name.startswith("torch."):
        return None  # the torch API
    if name.partition(".")[0] in imported_names(ctx) and not imported_definition_matches(ctx, call.func, PROTOCOL_TEXT):
        return None  # cheap, from text: the imported definition has no protocol event to read
    callee = resolved_callee(ctx, scope, call)
    if callee is None or callee.node is scope.node or isinstance(callee.node, ast.Module):
        return None
    callee_ctx = callee.ctx or ctx
    events = block_events(callee_ctx, callee, callee.node.body, through_calls=True, depth=depth + 1)
    if not events:
        return None
    names = _renaming(ctx, scope, callee, call)
    local = _locals(callee)
    found = []
    for event in events:
        owner = event.owner
        if owner is not None:
            head, dot, rest = owner.partition(".")
            if head in names:
                if names[head] is None:
                    return None  # a parameter given no plain name (an expression, *args)
                owner = names[head] + dot + rest
                owner = held_attribute(ctx, scope, owner, call) or owner  # trainer.opt -> opt given to Trainer(opt)
            elif callee_ctx is not ctx or head in local:
                return None  # no name for it in the caller
        found.append(CalleeEvent(event.kind, owner, event.call, event.conditional, event.spelling))
    return found


def resolved_callee(ctx: FileContext, scope: Scope, call: ast.Call) -> Optional[Scope]:
    """A function of the project, or a method of a class of this file called on an instance of it
    (``trainer.step(x)`` with ``trainer = Trainer(...)`` the name's only binding in the file, or
    the one binding of the scope that reaches the call)."""
    callee = called_function(ctx, scope, call.func)
    if callee is not None or not isinstance(call.func, ast.Attribute):
        return callee

    owner = dotted(call.func.value)
    cls = object_class(ctx, owner) if owner and "." not in owner else None
    if cls is None and owner and "." not in owner:  # trainer = Trainer(...) in this scope, the one binding reaching the call
        defs = facts(ctx, scope).reaching(owner, call)
        cls = instance_class(ctx, defs[0][1]) if len(defs) == 1 else None
    if cls is None:
        return None

    methods = [s for s in scopes(ctx) if s.class_node is cls and getattr(s.node, "name", None) == call.func.attr]
    return methods[0] if len(methods) == 1 else None


def _renaming(ctx: FileContext, scope: Scope, callee: Scope, call: ast.Call) -> dict[str, Optional[str]]:
    """Callee name -> caller name for ``self`` and the parameters (None: no plain name)."""
    args = callee.node.args
    params = [a.arg for a in args.posonlyargs + args.args]
    names: dict[str, Optional[str]] = {}
    if callee.self_name:
        receiver = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
        if receiver:
            names[callee.self_name] = receiver
        params = params[1:]
    for param, arg in zip(params, call.args):
        if isinstance(arg, ast.Starred):
            break
        text = dotted(arg)
        if text:
            names[param] = text
    for keyword in call.keywords:
        if keyword.arg and dotted(keyword.value):
            names[keyword.arg] = dotted(keyword.value)
    every = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} | {a.arg for a in (args.vararg, args.kwarg) if a}
    for param in every - names.keys():
        names[param] = None  # a default, or an expression: unknown, never a global of the file
    return names


def _locals(callee: Scope) -> set[str]:
    found = set()
    for node in scope_nodes(callee):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
    return found
