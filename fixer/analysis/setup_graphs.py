"""Graphs built once when an object is set up and walked by every training iteration.

A *setup graph* is a field an object's ``__init__`` stores exactly once, unconditionally and with
gradient recording on, whose value is a graph that saved tensors from a leaf that requires grad
(``self.scale = torch.exp(nn.Parameter(torch.zeros(1)))``, ``self.gram = self.w @ self.w.t()``),
and that nothing else assigns: no other statement of the class, no ``obj.<field> = ...`` anywhere
in the file. It lives as long as the object, so its graph is built once.

A loop *walks* it when a backward that frees its graph runs in every iteration and the tensor it
backpropagates is computed from the field: ``loss.backward()`` where ``loss`` comes, through
local names, the return values of the methods it calls (``model.nll()``, ``self.kernel(x, x)``
running ``forward``) and the modules the object holds (a field ``__init__`` alone stores a
construction of one of this file's classes into), from a read of the field. An object rebound
inside the loop is a new object every iteration and is not followed. The first iteration's
backward frees the setup graph, the second raises.

``walked_setup_graphs(ctx)`` lists (class, field, store, loop, backward call), one per field."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from fixer.analysis.calls import BackwardCall, backward_calls
from fixer.analysis.class_model import Write, attribute_writes
from fixer.analysis.graph import Kind, facts
from fixer.analysis.graph_reuse import frees_graph, innermost_loop, repeats_per_iteration
from fixer.analysis.loop_reach import Field, read_fields, rebound_in, stored_from_outside
from fixer.analysis.scopes import Scope, scopes, statement_index
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


def setup_graphs(ctx: FileContext, cls: ast.ClassDef) -> dict[str, Write]:
    """The class's setup graphs: attribute -> its one store in ``__init__``."""

    def compute() -> dict[str, Write]:
        found = {}
        for attr, writes in attribute_writes(ctx, cls).items():
            write = writes[0]
            if len(writes) != 1 or write.method.node.name != "__init__" or not write.every_call or write.no_grad:
                continue
            if not isinstance(write.stmt, ast.Assign) or len(write.stmt.targets) != 1 or attr in stored_from_outside(ctx):
                continue
            if _built_from_trainable_leaf(ctx, write.method, write.stmt):
                found[attr] = write
        return found

    return ctx.memo(("setup_graphs", id(cls)), compute)


def walked_setup_graphs(ctx: FileContext) -> list[WalkedSetupGraph]:
    def compute() -> list[WalkedSetupGraph]:
        classes = {id(c): c for c in statement_index(ctx).classes}
        fields = {(key, attr): write for key, cls in classes.items() for attr, write in setup_graphs(ctx, cls).items()}
        if not fields:
            return []
        found: dict[Field, WalkedSetupGraph] = {}
        for scope in scopes(ctx):
            for call in backward_calls(ctx, scope):
                loop = innermost_loop(ctx, call.node, scope.node)
                if loop is None or not frees_graph(call) or not repeats_per_iteration(ctx, call, loop):
                    continue
                for field in sorted(read_fields(ctx, scope, [call.target], rebound_in(loop)) & fields.keys()):
                    found.setdefault(field, WalkedSetupGraph(classes[field[0]], field[1], fields[field], loop, call))
        return list(found.values())

    return ctx.memo("walked_setup_graphs", compute)


def _built_from_trainable_leaf(ctx: FileContext, init: Scope, stmt: ast.Assign) -> bool:
    graph = facts(ctx, init)
    if graph.kind(stmt.value, stmt) != Kind.GRAPH or not saves_tensors(ctx, init, stmt.value):
        return False
    return any(isinstance(n, ast.expr) and graph.kind(n, stmt) == Kind.LEAF for n in walk(stmt.value))
