"""GF104's state stored by a helper method on the forward path: ``forward`` reads ``self.memory``,
then calls ``self.update_memory(hidden)``, which stores a graph built from it
(``self.memory = torch.gather(hidden, ...)``). The next call's read, before the helper runs again,
sees the previous call's graph: when it reaches ``forward``'s output, the next backward walks the
graph the previous backward freed.

``helper_cached_states(ctx)`` lists them as ``CachedState`` whose ``method`` is the helper (where
the store is, and the fix); the read is ``forward``'s. The same conditions hold as for a store in
``forward`` itself (``module_cache``): a graph store (``stores_graph``: what every call passes),
not managed by another method or by code outside the class, and a read that no store of this
call precedes (before the helper's first call) that flows into a returned value."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.carried_flow import Feeding, position
from fixer.analysis.graph import facts
from fixer.analysis.module_cache import (
    CachedState,
    attribute_reads,
    class_methods_of_modules,
    forward_path,
    managed,
    returned_values,
    stores_graph,
)
from fixer.analysis.calls import backward_calls
from fixer.analysis.no_grad import eval_only
from fixer.analysis.scopes import Scope, enclosing_block, scope_nodes, scopes
from fixer.context import FileContext
from fixer.nodes import walk


def helper_cached_states(ctx: FileContext) -> list[CachedState]:
    return ctx.memo("helper_cached_states", lambda: [s for methods in class_methods_of_modules(ctx) for s in _states(ctx, methods)])


def _states(ctx: FileContext, methods: list[Scope]) -> list[CachedState]:
    path = forward_path(methods)
    if len(path) < 2:
        return []
    forward, found = path[0], []
    for helper in path[1:]:
        calls = [n for n in scope_nodes(forward) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr == helper.node.name and isinstance(n.func.value, ast.Name) and n.func.value.id == forward.self_name]
        if not calls:
            continue  # (called from another helper: not followed)
        first = min(position(c) for c in calls)
        prefix = f"{helper.self_name}."
        for name, defs in facts(ctx, helper).assignments.items():
            if not name.startswith(prefix) or name.count(".") != 1:
                continue
            attr = name[len(prefix) :]
            stores = tuple((s, v) for s, v in defs if isinstance(s, ast.Assign) and v is not None and stores_graph(ctx, helper, methods, v, s) and not eval_only(ctx, s, helper))
            if not stores or managed(ctx, helper, methods, path, attr):
                continue
            outputs = [Feeding(ctx, forward.body, r.value, r) for r in returned_values(forward)]
            earlier = [r for r in attribute_reads(forward, f"{forward.self_name}.{attr}") if position(r) < first and not eval_only(ctx, r, forward)]
            feeding = tuple(r for r in earlier if any(f.reaches(r) for f in outputs))
            if feeding:
                found.append(CachedState(helper, attr, stores[0][0], feeding[0], False, True, False, feeding, tuple(methods), stores))
    return found


def sequence_loop(ctx: FileContext) -> Optional[ast.AST]:
    """A loop of the file that runs several forward passes before one backward: a pass's backward
    statement comes after a loop of that pass which calls a module (``for t, x in enumerate(seq):
    y = model(x); cost = cost + ...`` then ``cost.backward()``). The state a module keeps from call
    to call is then meant to carry the gradient between those calls, backpropagation through the
    sequence: detaching it cuts that; only its crossing from one backward's sequence into the next
    is the bug (a reset at the start of the sequence)."""

    def compute() -> Optional[ast.AST]:
        for scope in scopes(ctx):
            graph = facts(ctx, scope)
            for call in backward_calls(ctx, scope):
                stmt = ctx.statement_of(call.node)
                block = enclosing_block(ctx, stmt)
                for earlier in (block or [])[: next((i for i, s in enumerate(block or []) if s is stmt), 0)]:
                    if isinstance(earlier, (ast.For, ast.While)) and any(
                        isinstance(n, ast.Call) and graph.is_module(n.func) for n in walk(earlier)
                    ):
                        return earlier
        return None

    return ctx.memo("sequence_loop", compute)
