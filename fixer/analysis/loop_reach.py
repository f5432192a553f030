"""What one iteration of a training loop runs and reads, through the objects it calls.

A loop's code reaches further than its body: ``model(x)`` runs the ``forward`` of the class that
``model`` holds an instance of, ``model.nll()`` runs that method, ``train_step(model, x)`` runs a
function whose parameter ``model`` then holds that object, and inside a method
``self.kernel(x, x)`` runs the ``forward`` of the object ``__init__`` stored in ``self.kernel``
(made there, or given to the one construction of the class in this file). This file's classes and
functions are followed, and, for what an iteration reads and runs, the functions of other project
files it calls (``compute_loss(self, x)`` of ``helpers.py``), read in their own file, where a parameter
the call gives an object of this file's class stands for that object (``self.model(x)``,
``self.penalty``). Only objects made once: a name the loop rebinds is a new object in every
iteration and is not followed, nor a field any code other than ``__init__`` stores.

``iteration_backwards(ctx)``: the backward calls that run, and free their graph, in every
iteration of a loop: in the loop's body, or in a function or method the loop calls that
backpropagates on every call (a step function, ``trainer.step()``, or one that calls such a
method on every call), with the objects its parameters hold. ``read_fields(ctx, scope, exprs, rebound, bound)``: the fields (class,
attribute) whose values flow into ``exprs`` through local names, the return values of the methods
they call and the objects they hold. ``methods_run(ctx, scope, loop)``: the methods the loop's
body runs, at any depth. ``stored_from_outside(ctx)``: attributes some code stores on an object
other than its own ``self`` (``model.scale = ...``): such a field's lifetime is not its class's."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

from fixer.analysis.assignments import BINDINGS
from fixer.analysis.call_sites import path_instance
from fixer.analysis.callees import called_function, instance_class
from fixer.analysis.calls import BackwardCall, backward_calls, frees_graph
from fixer.analysis.carried_flow import always_runs
from fixer.analysis.class_model import attribute_writes, class_methods, construction_argument
from fixer.analysis.flow import flowing_nodes
from fixer.analysis.graph import facts
from fixer.analysis.imported_definitions import imported_function
from fixer.analysis.graph_reuse import assigned_names, innermost_loop, repeats_per_iteration
from fixer.analysis.names import dotted
from fixer.analysis.scopes import LOOP_STATEMENTS, Scope, enclosing_loops, nodes_of, scope_nodes, scope_of, scopes
from fixer.context import FileContext
from fixer.nodes import walk

MAX_CALL_DEPTH = 4  # methods followed from the loop into the objects it calls
MAX_STEP_DEPTH = 2  # calls followed from the loop to a backward that runs on every call

Field = tuple[int, str]  # (id of the class node, attribute)
Bound = dict[str, ast.ClassDef]  # parameter -> the class of the object it holds


@dataclass(frozen=True)
class IterationBackward:
    loop_scope: Scope  # the function (or module) holding the loop
    loop: ast.AST
    scope: Scope  # where the backward call is: the loop's scope or a step function's
    call: BackwardCall
    bound: tuple[tuple[str, ast.ClassDef], ...] = ()  # the step function's parameters and their objects

    @property
    def rebound(self) -> set[str]:
        return rebound_in(self.loop) if self.scope is self.loop_scope else local_names(self.scope)


def iteration_backwards(ctx: FileContext) -> list[IterationBackward]:
    def compute() -> list[IterationBackward]:
        found = []
        stepping = any(_every_call_backwards(ctx, scope) for scope in scopes(ctx))  # else no call runs a step
        for scope in scopes(ctx):
            for call in backward_calls(ctx, scope):
                loop = innermost_loop(ctx, call.node, scope.node)
                if loop is not None and frees_graph(call) and repeats_per_iteration(ctx, call, loop):
                    found.append(IterationBackward(scope, loop, scope, call))
            for loop in nodes_of(scope, LOOP_STATEMENTS) if stepping else ():
                found.extend(_through_step_calls(ctx, scope, loop))
        return found

    return ctx.memo("iteration_backwards", compute)


def _through_step_calls(ctx: FileContext, scope: Scope, loop: ast.AST) -> list[IterationBackward]:
    rebound = None  # the loop's names, walked for when a call of its own passes (many loops have none)
    found = []
    for node in walk(loop):
        if not isinstance(node, ast.Call) or innermost_loop(ctx, node, scope.node) is not loop:
            continue
        if not repeats_per_iteration(ctx, BackwardCall(node, node, "call"), loop):
            continue
        rebound = rebound_in(loop) if rebound is None else rebound
        callee = callee_method(ctx, scope, node.func, rebound, {})
        if callee is None or callee.node is scope.node:
            continue
        bound = _bindings(ctx, scope, node, callee, rebound, {})
        for inner, call, held in _backwards_per_call(ctx, callee, bound, MAX_STEP_DEPTH):
            found.append(IterationBackward(scope, loop, inner, call, tuple(held.items())))
    return found


def _backwards_per_call(ctx: FileContext, function: Scope, bound: Bound, depth: int) -> list[tuple[Scope, BackwardCall, Bound]]:
    """The backward calls that run, and free their graph, on every call of ``function``: its own,
    or else those of the functions and methods it calls on every call (``train_step(trainer)``
    running ``trainer.step(batch)``), ``depth`` calls deep, each with the objects its parameters hold."""
    found = [(function, call, bound) for call in _every_call_backwards(ctx, function)]
    if found or depth <= 1:
        return found
    names = local_names(function)
    for node in scope_nodes(function):
        if not isinstance(node, ast.Call) or enclosing_loops(ctx, ctx.statement_of(node), function) or not always_runs(ctx, node, function.node):
            continue
        inner = callee_method(ctx, function, node.func, names, bound)
        if inner is not None and inner.node is not function.node:
            found += _backwards_per_call(ctx, inner, _bindings(ctx, function, node, inner, names, bound), depth - 1)
    return found


def _every_call_backwards(ctx: FileContext, scope: Scope) -> list[BackwardCall]:
    """The function's backward calls that run, and free their graph, on every call."""
    return [
        c for c in backward_calls(ctx, scope)
        if frees_graph(c) and c.kind != "autograd.grad" and not enclosing_loops(ctx, ctx.statement_of(c.node), scope)
        and always_runs(ctx, c.node, scope.node)
    ]


def rebound_in(loop: ast.AST) -> set[str]:
    """Names the loop binds (its target and every assignment in it)."""
    return {name for node in walk(loop) for name in assigned_names(node)}


def local_names(scope: Scope) -> set[str]:
    """Names a function binds in its body: made anew at every call."""
    return {name for node in nodes_of(scope, BINDINGS) for name in assigned_names(node)}


def read_fields(ctx: FileContext, scope: Scope, exprs: list[ast.expr], rebound: set[str], bound: Optional[Bound] = None,
                depth: int = MAX_CALL_DEPTH, seen: frozenset = frozenset()) -> set[Field]:
    bound = bound or {}
    own = scope.ctx or ctx  # a function of another file is read in its own file
    graph = facts(own, scope)
    found: set[Field] = set()
    objects = frozenset(bound) - rebound  # the parameters holding an object of a known class
    todo, done = list(exprs), set()
    while todo:
        expr = todo.pop()
        if id(expr) in done:
            continue
        done.add(id(expr))
        for node in flowing_nodes(own, expr, objects=objects):  # not what is read under .detach(), .item(), .data
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and (holder := _holder_class(scope, node.value, rebound, bound)):
                found.add((id(holder), node.attr))
                todo.extend(value for _, value in graph.assignments.get(dotted(node), []) if value is not None)  # stored here
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and own is ctx and (prefix := dotted(node.value)):
                held = path_instance(ctx, scope, prefix)  # ``windows.data``: a field of an object of this file's class
                if held is not None:
                    found.add((id(held), node.attr))
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                for stmt, value in graph.assignments.get(node.id, []):
                    if value is None and isinstance(stmt, (ast.For, ast.AsyncFor)):
                        value = stmt.iter  # a loop variable is an element of what the loop iterates
                    if value is not None:
                        todo.append(value)
            elif isinstance(node, ast.Call) and depth > 0:
                callee = callee_method(ctx, scope, node.func, rebound, bound, imported=True)
                if callee is not None and id(callee.node) not in seen:
                    # what it returns, or yields (a generator method serving slices of a field)
                    returns = [n.value for n in scope_nodes(callee) if isinstance(n, (ast.Return, ast.Yield)) and n.value is not None]
                    inner = _bindings(ctx, scope, node, callee, rebound, bound)
                    found |= read_fields(ctx, callee, returns, local_names(callee), inner, depth - 1, seen | {id(callee.node)})
    return found


def _holder_class(scope: Scope, value: ast.expr, rebound: set[str], bound: Bound) -> Optional[ast.ClassDef]:
    """The class whose field ``value.<attr>`` is: the method's own object, or a parameter the call
    gives an object of this file's class (``bound``) that the function does not rebind."""
    if not isinstance(value, ast.Name):
        return None
    if scope.self_name and value.id == scope.self_name:
        return scope.class_node
    return bound.get(value.id) if value.id not in rebound else None


def walking_steps(ctx: FileContext, writers: dict[Field, Scope]) -> dict[Field, IterationBackward]:
    """For each field (and the method that writes it), the first iteration backward whose loss
    reads the field in a loop that runs that method, in the order they are found."""
    found: dict[Field, IterationBackward] = {}
    for step in iteration_backwards(ctx):
        run = {id(m.node) for m in methods_run(ctx, step.loop_scope, step.loop)}
        read = read_fields(ctx, step.scope, [step.call.target], step.rebound, dict(step.bound))
        for key, method in writers.items():
            if key in read and id(method.node) in run:
                found.setdefault(key, step)
    return found


def methods_run(ctx: FileContext, scope: Scope, loop: ast.AST) -> list[Scope]:
    """The methods of this file's classes (and the functions, of this file or another project file)
    that the loop's body calls, directly or through them."""
    rebound = rebound_in(loop)
    found: dict[int, Scope] = {}
    todo = [(scope, [n for n in walk(loop) if isinstance(n, ast.Call)], rebound, {}, MAX_CALL_DEPTH)]
    while todo:
        where, calls, names, bound, depth = todo.pop()
        for call in calls:
            callee = callee_method(ctx, where, call.func, names, bound, imported=True)
            if callee is None or id(callee.node) in found or callee.node is scope.node:
                continue
            found[id(callee.node)] = callee
            if depth > 1:
                inner = _bindings(ctx, where, call, callee, names, bound)
                todo.append((callee, [n for n in scope_nodes(callee) if isinstance(n, ast.Call)], local_names(callee), inner, depth - 1))
    return list(found.values())


def callee_method(ctx: FileContext, scope: Scope, func: ast.expr, rebound: set[str], bound: Bound,
                  imported: bool = False) -> Optional[Scope]:
    """The method a call runs: ``self.method``, ``obj.method`` or ``obj(...)`` (its ``forward``) for
    an object of one of this file's classes, ``self.sub(...)`` for an object the object holds,
    or a function of this file (with ``imported``, or of another project file). In a function of
    another file (``scope.ctx`` is not ``ctx``) only the objects ``bound`` gives are this file's."""
    name = dotted(func) or ""
    root = name.partition(".")[0]
    if root in rebound:
        return None
    home = (scope.ctx or ctx) is ctx
    held = _held_class(ctx, scope, func, bound)
    if held is not None:
        return class_methods(ctx, held).get("forward")
    if isinstance(func, ast.Name):
        cls = bound.get(func.id) or (_object_class(ctx, scope, func.id) if home else None)
        if cls is not None:
            return class_methods(ctx, cls).get("forward")
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in bound:
        return class_methods(ctx, bound[func.value.id]).get(func.attr)
    own = ctx if home else scope.ctx
    if not home and not isinstance(func, ast.Name):
        return None  # (another file's objects are not this file's classes)
    return called_function(own, scope, func, imported=False) or (imported_function(own, func) if imported else None)


def _object_class(ctx: FileContext, scope: Scope, name: str) -> Optional[ast.ClassDef]:
    """The class of this file whose one construction the scope binds ``name`` to."""
    values = facts(ctx, scope).assignments.get(name, [])
    return instance_class(ctx, values[0][1]) if len(values) == 1 else None


def _bindings(ctx: FileContext, scope: Scope, call: ast.Call, callee: Scope, rebound: set[str], bound: Bound) -> Bound:
    """The callee's parameters that the call gives an object of a known class."""
    params = [a.arg for a in callee.node.args.posonlyargs + callee.node.args.args]
    if callee.self_name and params:
        params = params[1:]
    given = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
    home = (scope.ctx or ctx) is ctx
    found = {}
    for param, arg in given:
        if not isinstance(arg, ast.Name) or arg.id in rebound:
            continue
        if home and scope.self_name and arg.id == scope.self_name:
            cls = scope.class_node  # the method's own object, given on (``compute_loss(self, x)``)
        else:
            cls = bound.get(arg.id) or (_object_class(ctx, scope, arg.id) if home else None)
        if cls is not None:
            found[param] = cls
    return found


def _held_class(ctx: FileContext, scope: Scope, func: ast.expr, bound: Bound) -> Optional[ast.ClassDef]:
    """The class of ``obj.sub`` (``obj`` the method's own object, or an object ``bound`` gives)
    when ``__init__`` alone stores into it ``Cls(...)`` of this file, or the argument the class's
    one construction gives, bound to such an object."""
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
        return None
    home = (scope.ctx or ctx) is ctx
    owner = scope.class_node if home and scope.self_name and func.value.id == scope.self_name else bound.get(func.value.id)
    if owner is None:
        return None
    writes = attribute_writes(ctx, owner).get(func.attr, [])
    if len(writes) != 1 or writes[0].method.node.name != "__init__" or func.attr in stored_from_outside(ctx):
        return None
    cls = instance_class(ctx, writes[0].value)
    if cls is None and isinstance(writes[0].value, ast.Name):
        given = construction_argument(ctx, owner, func.attr)
        if isinstance(given, ast.Name):
            cls = _object_class(ctx, scope_of(ctx, given), given.id)
    return cls


STORING = frozenset({ast.Assign, ast.AugAssign, ast.AnnAssign})  # the statements with targets


def stored_from_outside(ctx: FileContext) -> frozenset[str]:
    """Attributes stored as ``obj.<attr> = ...`` on anything but a method's own object."""

    def compute() -> frozenset[str]:
        selves = {id(s.node): s.self_name for s in scopes(ctx)}
        found = set()
        for scope in scopes(ctx):
            for node in nodes_of(scope, STORING):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
                for target in targets:
                    for part in walk(target):
                        if isinstance(part, ast.Attribute) and isinstance(part.ctx, ast.Store) and not (
                            isinstance(part.value, ast.Name) and part.value.id == selves.get(id(scope.node))
                        ):
                            found.add(part.attr)
        return frozenset(found)

    return ctx.memo("stored_from_outside", compute)
