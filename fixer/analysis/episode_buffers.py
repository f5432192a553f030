"""Per-episode buffers (REINFORCE's ``saved_log_probs`` and ``rewards``): a carried container
whose stored values reach the loss only through the container, and the other lists filled in
the same pass whose contents reach the same backward. Emptying them together each pass (GF101's
fix) keeps each pass's entries paired."""

from __future__ import annotations

import ast

from fixer.analysis.carried import CarriedValue
from fixer.analysis.carried_flow import Feeding, contains, inside
from fixer.analysis.carried_shape import initial_value
from fixer.analysis.graph import facts
from fixer.analysis.scopes import scope_of
from fixer.analysis.importers import class_importers
from fixer.analysis.names import dotted
from fixer.analysis.object_fields import field_initials, is_container, is_empty_container, managed_elsewhere, object_manages, project_object_class
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.analysis.vocabulary import SEQUENCE_ADDS


def only_through_container(ctx: FileContext, value: CarriedValue) -> bool:
    """Every stored value reaches the loss only through the container: an expression, or a name
    read nowhere else in the iteration (``log_probs.append(dist.log_prob(a))`` ... ``stack(log_probs)``).
    Storing detached values would then leave this iteration's loss without its own gradient."""
    store_stmts = [s for s, _ in value.stores]
    for stmt, stored in value.stores:
        name = dotted(stored) if isinstance(stored, (ast.Name, ast.Attribute)) else None
        if name is not None:  # a variable or a field (``self.h``) read elsewhere: gradient flows there too
            for node in walk(scope_of(ctx, stmt).node if value.stored_elsewhere else value.iteration.node):
                if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and dotted(node) == name:
                    if not any(contains(s, node) for s in store_stmts):
                        return False
        elif not isinstance(stored, (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript, ast.Attribute)):
            return False
    return True


def episode_buffers(ctx: FileContext, scope, value: CarriedValue) -> list[str]:
    """The container and the other lists filled alongside it in the same pass whose contents reach
    the same backward (``rewards`` next to ``saved_log_probs``): emptying one but not the others
    would pair this pass's entries with earlier passes'."""
    it = value.iteration
    graph = facts(ctx, scope)
    feeding = Feeding(ctx, it.body, it.backward.target, ctx.statement_of(it.backward.node))
    buffers = [value.name]
    if value.stored_elsewhere:
        # filled anywhere (``agent.rewards.append(r)`` in the training loop): every empty
        # ``self`` list this call reads into its loss that something appends to
        owner = value.name.split(".", 1)[0]
        found = None if owner == scope.self_name else project_object_class(ctx, owner)
        users = class_importers(ctx, scope.class_node) if found is None and scope.class_node is not None else []
        filled = {node.func.value.attr for each in [ctx, *users] for node in walk(each.tree) if _appends_to_attribute(node)}
        for name in sorted(feeding.live):
            if name in buffers or not name.startswith(f"{owner}.") or name.count(".") != 1 or name[len(owner) + 1 :] not in filled:
                continue
            if found is None:
                initial, defined = initial_value(ctx, scope, graph, it, name)
            else:
                inits = field_initials(*found, name.split(".", 1)[1])
                initial, defined = (inits[0] if inits else None), bool(inits)
            rebuilt = any(inside(ctx, s, it.node) for s, _ in graph.assignments.get(name, []))
            managed = object_manages(ctx, scope, name, found) if found else any(managed_elsewhere(each, scope, name, scope.class_node) for each in [ctx, *users])
            if defined and is_empty_container(initial) and not rebuilt and not managed:
                buffers.append(name)
        return buffers
    for node in walk(it.node):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SEQUENCE_ADDS):
            continue
        name = dotted(node.func.value)
        if not name or name in buffers or name not in feeding.live:
            continue
        initial, defined = initial_value(ctx, scope, graph, it, name)
        rebuilt = any(inside(ctx, s, it.node) for s, _ in graph.assignments.get(name, []))
        if defined and is_container(ctx, initial) and not rebuilt:
            buffers.append(name)
    return buffers


def _appends_to_attribute(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in SEQUENCE_ADDS
        and isinstance(node.func.value, ast.Attribute)
    )
