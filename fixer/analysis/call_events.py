"""The optimizer protocol's events in order: ``block_events`` gives the backward calls that fill
``.grad``, the zero_grad and the step calls of a straight-line block, each at the block statement
holding it, and (``through_calls``) those that happen inside a function the training loop calls.

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
import bisect
import re
from dataclasses import dataclass
from typing import Iterator, Optional

from fixer.analysis.arguments import bound_arguments, parameter_default, parameters
from fixer.analysis.bindings import imported_names
from fixer.analysis.callees import called_function, instance_class
from fixer.analysis.calls import backward_calls, optimizer_calls
from fixer.analysis.graph import facts
from fixer.analysis.held_values import held_attribute
from fixer.analysis.imported_definitions import imported_definition_matches
from fixer.analysis.names import dotted, qualified
from fixer.analysis.object_fields import object_class
from fixer.analysis.passes import guarded_statement, is_pass_filter
from fixer.analysis.scopes import Scope, scope_nodes, scopes
from fixer.context import FileContext

MAX_DEPTH = 2
CONDITIONAL = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.BoolOp, ast.comprehension, ast.Match)
PROTOCOL_TEXT = re.compile(rb"zero_grad|\.step\s*\(|backward\s*\(")


@dataclass(frozen=True)
class CalleeEvent:
    kind: str  # "backward", "zero_grad", "step"
    owner: Optional[str]  # in the caller's names
    call: ast.Call  # the callee's own call (in the callee's file)
    conditional: bool  # runs only sometimes within the callee
    spelling: str


@dataclass(frozen=True)
class Event:
    kind: str  # "backward", "zero_grad" or "step"
    owner: Optional[str]  # optimizer (or model, for zero_grad); None for a backward
    call: ast.Call
    index: int  # position in the block of the statement that holds the call
    direct: bool  # the statement is exactly this call (``opt.step()`` on its own), not nested in it
    conditional: bool  # inside an if / loop / try / boolean expression within that statement
    spelling: str = ""  # backward: BackwardCall.kind ("method", "owner", ...); step: "scaler" or ""
    via: Optional[ast.Call] = None  # the call of a project function inside which it happens

    @property
    def site(self) -> ast.Call:
        """Where the event happens in the block's own file: the call itself, or the helper call."""
        return self.via or self.call


def block_events(ctx: FileContext, scope: Scope, block: list[ast.stmt], through_calls: bool = False, depth: int = 0) -> list[Event]:
    """The protocol events of ``block`` in source order (backward calls that fill ``.grad``,
    zero_grad and step calls), each placed at the block statement that holds it. With
    ``through_calls``, also the events inside project functions the block calls (``call_events``),
    in the callee's order, at the statement holding the call."""
    positions = {id(stmt): i for i, stmt in enumerate(block)}
    found, lines = _scope_events(ctx, scope, through_calls, depth)
    events, order = [], {}
    first = min((n.lineno for stmt in block for n in (stmt, *getattr(stmt, "decorator_list", ()))), default=0)
    last = max((stmt.end_lineno for stmt in block), default=0)
    # only the calls on the block's lines (each block of a module asks: a scan of all was quadratic)
    for _, i in lines[bisect.bisect_left(lines, (first,)):bisect.bisect_right(lines, (last, len(found)))]:
        node, kind, owner, spelling, inner, via = found[i]
        conditional, holder, child = inner, None, None
        for parent in _chain(ctx, via or node):
            conditional = conditional or _runs_conditionally(parent, child) and not is_pass_filter(ctx, parent, child)
            if id(parent) in positions:
                holder = parent
                break
            child = parent
        if holder is None:
            continue
        direct = via is None and _alone_in(ctx, holder, node)
        event = Event(kind, owner, node, positions[id(holder)], direct, conditional, spelling, via)
        events.append(event)
        order[id(event)] = i
    return sorted(events, key=lambda e: (e.index, e.site.lineno, e.site.col_offset, order[id(e)]))


def _scope_events(ctx: FileContext, scope: Scope, through_calls: bool, depth: int) -> tuple[list[tuple], list[tuple[int, int]]]:
    """The scope's backward and optimizer calls (and, ``through_calls``, those inside the project
    functions it calls, at the call), once a scope: (the calls, their (line, index) sorted)."""

    def compute() -> tuple[list[tuple], list[tuple[int, int]]]:
        found: list[tuple[ast.Call, str, Optional[str], str, bool, Optional[ast.Call]]] = [
            (call.node, "backward", None, call.kind, False, None) for call in backward_calls(ctx, scope) if call.kind != "autograd.grad"
        ]
        found += [(c.node, c.kind, c.owner, "scaler" if c.via_scaler else "", False, None) for c in optimizer_calls(ctx, scope)]
        if through_calls:
            listed = {id(f[0]) for f in found}  # (a set: testing each call against the list was quadratic)
            for node in scope_nodes(scope):
                if isinstance(node, ast.Call) and id(node) not in listed:
                    for e in call_events(ctx, scope, node, depth) or ():
                        found.append((e.call, e.kind, e.owner, e.spelling, e.conditional, node))
                        listed.add(id(e.call))
        return found, sorted(((f[5] or f[0]).lineno, i) for i, f in enumerate(found))

    return ctx.memo(("scope_events", id(scope.node), through_calls, depth), compute)


def _alone_in(ctx: FileContext, holder: ast.stmt, call: ast.Call) -> bool:
    """``holder`` is the call's own statement, or a shared guard holding only it (``if c: opt.step()``,
    which moves as a whole with its guard)."""
    holder = guarded_statement(ctx, holder)
    return isinstance(holder, ast.Expr) and holder.value is call


def _runs_conditionally(parent: ast.AST, child: Optional[ast.AST]) -> bool:
    """``child`` (None: the call itself) runs only sometimes inside ``parent``. A ``try`` body and
    its ``finally`` run every time; its handlers and ``else`` do not."""
    if isinstance(parent, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        return child is not None and (child in parent.orelse or isinstance(child, ast.ExceptHandler))
    return isinstance(parent, CONDITIONAL)


def _chain(ctx: FileContext, node: ast.AST) -> Iterator[ast.AST]:
    yield node
    yield from ctx.ancestors(node)


def call_events(ctx: FileContext, scope: Scope, call: ast.Call, depth: int = 0) -> Optional[list[CalleeEvent]]:
    """The events of one call of a project function, or None when unknown or it has none."""
    if depth >= MAX_DEPTH:
        return None
    key = ("call_events", id(call), depth)
    return ctx.memo(key, lambda: _compute(ctx, scope, call, depth))


def _compute(ctx: FileContext, scope: Scope, call: ast.Call, depth: int) -> Optional[list[CalleeEvent]]:
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
    flags = _constant_flags(callee, call)
    found = []
    for event in events:
        conditional = event.conditional
        if flags and conditional:
            decided = _decided(callee_ctx, callee, event.call, flags)
            if decided is False:
                continue  # ``if zero_grad: opt.zero_grad()`` called with zero_grad=False: never runs
            conditional = decided is None
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
        found.append(CalleeEvent(event.kind, owner, event.call, conditional, event.spelling))
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


def skipped_on_call(callee_ctx: FileContext, callee: Scope, call: ast.Call, node: ast.AST) -> bool:
    """``node`` of the callee never runs on ``call``: it sits under ``if flag:`` (or ``if not
    flag:``) and the call gives ``flag`` a constant (or leaves its default) that skips it."""
    flags = _constant_flags(callee, call)
    return bool(flags) and _decided(callee_ctx, callee, node, flags) is False


def runs_on_call(callee_ctx: FileContext, callee: Scope, call: ast.Call, node: ast.AST) -> bool:
    """``node`` of the callee runs on every ``call``: the only conditions around it are ``if flag:``
    (or ``if not flag:``) on parameters the call gives a constant (or leaves at its default) that
    runs it (``if backward: loss.backward()`` with ``backward=True`` by default)."""
    flags = _constant_flags(callee, call)
    return bool(flags) and _decided(callee_ctx, callee, node, flags) is True


def _constant_flags(callee: Scope, call: ast.Call) -> dict[str, bool]:
    """Parameter -> truth of the constant this call gives it (or its default, where it gives
    none), for the parameters the callee never rebinds."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return {}
    given = dict(bound_arguments(callee, call))
    rebound = _locals(callee)
    flags = {}
    for param in parameters(callee):
        value = given.get(param) or (None if param in given else parameter_default(callee, param))
        if isinstance(value, ast.Constant) and param not in rebound:
            flags[param] = bool(value.value)
    return flags


def _decided(ctx: FileContext, callee: Scope, node: ast.AST, flags: dict[str, bool]) -> Optional[bool]:
    """Whether ``node`` runs on this call, where the only conditions around it in the callee are
    ``if flag:`` / ``if not flag:`` on constant flags: False when one is false, True when all
    hold, None when another condition is around it (or it is not the callee's own statement)."""
    child, runs = node, True
    for parent in ctx.ancestors(node):
        if parent is callee.node:
            return runs
        if isinstance(parent, ast.If) and child is not parent.test:
            negated = isinstance(parent.test, ast.UnaryOp) and isinstance(parent.test.op, ast.Not)
            flag = parent.test.operand if negated else parent.test
            if not (isinstance(flag, ast.Name) and flag.id in flags):
                return None
            holds = flags[flag.id] != negated
            runs = runs and holds == any(child is s for s in parent.body)
        elif _runs_conditionally(parent, child if child is not node else None):
            return None
        child = parent
    return None


def _locals(callee: Scope) -> set[str]:
    found = set()
    for node in scope_nodes(callee):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
    return found
