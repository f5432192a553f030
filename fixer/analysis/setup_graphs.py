"""Graphs built once when an object is set up and walked by every training iteration.

A *setup graph* is a field an object's setup (``__init__``, or a method that runs once:
``run_once``) stores exactly once, unconditionally and with gradient recording on, whose value is a graph that saved tensors from a leaf that requires grad
(``self.scale = torch.exp(nn.Parameter(torch.zeros(1)))``, ``self.gram = self.w @ self.w.t()``),
and that nothing else assigns: no other statement of the class, no ``obj.<field> = ...`` anywhere
in the file. It lives as long as the object, so its graph is built once.

A loop *walks* it when a backward that runs in every iteration (``loop_reach.iteration_backwards``:
in the loop, or in a step function or method it calls) backpropagates a tensor computed from the
field (``loop_reach.read_fields``: through local names, the return values of the methods called,
the objects held). The first iteration's backward frees the setup graph, the second raises. A
field that a method of its own class reads and backpropagates through on every call is left to
``init_graphs`` (GF102).

``walked_setup_graphs(ctx)`` lists (class, field, store, loop, backward call), one per field."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from fixer.analysis.callees import called_function
from fixer.analysis.calls import BackwardCall
from fixer.analysis.class_model import Write, attribute_writes
from fixer.analysis.graph import Kind, facts
from fixer.analysis.loop_reach import Field, changed_elsewhere, class_key, loop_file, project_backwards, read_fields, stored_from_outside
from fixer.analysis.init_graphs import init_graphs
from fixer.analysis.run_once import runs_once
from fixer.analysis.scopes import RETURNS, Scope, nodes_of, scopes, statement_index
from fixer.analysis.shared_graph import saves_tensors
from fixer.context import FileContext
from fixer.nodes import walk


@dataclass(frozen=True)
class WalkedSetupGraph:
    cls: ast.ClassDef
    attr: str
    store: Write
    loop: ast.AST
    call: BackwardCall
    loop_in: str = ""  # the file of the loop, when it is not the class's


def setup_graphs(ctx: FileContext, cls: ast.ClassDef) -> dict[str, Write]:
    """The class's setup graphs: attribute -> its one store in a setup method."""

    def compute() -> dict[str, Write]:
        found = {}
        for attr, writes in attribute_writes(ctx, cls).items():
            write = writes[0]
            if len(writes) != 1 or not write.every_call or write.no_grad:
                continue
            if not isinstance(write.stmt, ast.Assign) or len(write.stmt.targets) != 1 or attr in stored_from_outside(ctx):
                continue
            # (the project's callers last: runs_once reads other files)
            if _built_from_trainable_leaf(ctx, write.method, write.stmt) and runs_once(ctx, write.method):
                found[attr] = write
        return found

    return ctx.memo(("setup_graphs", id(cls)), compute)


def walked_setup_graphs(ctx: FileContext) -> list[WalkedSetupGraph]:
    def compute() -> list[WalkedSetupGraph]:
        classes = {class_key(ctx, c): c for c in statement_index(ctx).classes}
        fields = {(key, attr): write for key, cls in classes.items() for attr, write in setup_graphs(ctx, cls).items()}
        if not fields:
            return []
        steps = project_backwards(ctx)  # (after: it reads the loops of every file importing a class of this one)
        found: dict[Field, WalkedSetupGraph] = {}
        recomputed = _read_by_their_step_method(ctx)
        for step in steps:
            read = read_fields(ctx, step.scope, [step.call.target], step.rebound, dict(step.bound))
            for field in sorted(read & fields.keys(), key=lambda f: (fields[f].stmt.lineno, f[1])):
                if id(fields[field].stmt) not in recomputed and not changed_elsewhere(ctx, step, classes[field[0]], field[1]):
                    found.setdefault(field, WalkedSetupGraph(classes[field[0]], field[1], fields[field], step.loop, step.call, loop_file(ctx, step)))
        return list(found.values())

    return ctx.memo("walked_setup_graphs", compute)


def _read_by_their_step_method(ctx: FileContext) -> set[int]:
    """Stores a method of their own class reads and backpropagates through on every call, in a
    loop: ``init_graphs`` (GF102 recomputes them at the start of that method)."""
    return {
        id(stmt) for scope in scopes(ctx)
        for _, stmt, _ in init_graphs(ctx, scope, lambda init, stmt: _built_from_trainable_leaf(ctx, init, stmt))
    }


def _built_from_trainable_leaf(ctx: FileContext, init: Scope, stmt: ast.Assign) -> bool:
    """The stored value is a graph that saved tensors, built from a leaf that requires grad or a
    module's parameters (``self.data = adapter(raw)``, ``adapter`` a module by every construction) here or
    in the function of the file it calls (``self.reg = self.regularization()``, whose returned
    value is built so)."""
    if facts(ctx, init).kind(stmt.value, stmt) != Kind.GRAPH:
        return False
    if _saves_from_leaf(ctx, init, stmt.value, stmt):
        return True
    callee = called_function(ctx, init, stmt.value.func) if isinstance(stmt.value, ast.Call) else None
    return callee is not None and any(_saves_from_leaf(callee.ctx or ctx, callee, v, at) for v, at in _returned(ctx, callee))


def _saves_from_leaf(ctx: FileContext, scope: Scope, value: ast.expr, at: ast.AST) -> bool:
    graph = facts(ctx, scope)
    if graph.kind(value, at) != Kind.GRAPH or not saves_tensors(ctx, scope, value):
        return False
    return any(
        isinstance(n, ast.expr) and graph.kind(n, at) == Kind.LEAF or isinstance(n, ast.Call) and graph.is_module(n.func) for n in walk(value)
    )


def _returned(ctx: FileContext, callee: Scope) -> list[tuple[ast.expr, ast.AST]]:
    """(value, where) for what the function returns: a returned name by its reaching assignments."""
    graph = facts(callee.ctx or ctx, callee)
    found: list[tuple[ast.expr, ast.AST]] = []
    for ret in (n for n in nodes_of(callee, RETURNS) if isinstance(n, ast.Return) and n.value is not None):
        if isinstance(ret.value, ast.Name):
            found += [(value, stmt) for stmt, value in graph.reaching(ret.value.id, ret) if value is not None]
        else:
            found.append((ret.value, ret))
    return found
