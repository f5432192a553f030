"""Module calls that save their own weights whatever their input.

A layer saves its weight for the gradient of its input when that input requires grad. A module
that feeds one parametrized layer's output into a weight-saving layer (``nn.Sequential(nn.Linear,
nn.ReLU, nn.Linear)``, a class of this file whose ``forward`` passes ``self.fc1``'s output on to
``self.fc2``) therefore saves the second layer's weight even when its own input is data: an
optimizer step on it after the call breaks a later backward through that call, as it does for a
module applied to a graph.

``saves_own_weights(ctx, scope, func)`` answers for a called name: ``G`` bound once in the file,
or ``self.G`` written once in its class, to such a construction; ``self.G = G`` in ``__init__``
follows what the class's one construction in the project gives (``project_life_field``). Anything else is unknown
(False): a module built by a factory, bound twice, or a layer the vocabulary below does not list."""

from __future__ import annotations

import ast
import re
from typing import Optional

from fixer.analysis.bindings import module_classes
from fixer.analysis.callees import instance_class
from fixer.analysis.class_model import attribute_writes, class_methods
from fixer.analysis.names import dotted, qualified
from fixer.analysis.project_callers import project_life_field
from fixer.analysis.scopes import Scope, scope_nodes, statement_index
from fixer.context import FileContext
from fixer.nodes import walk

# torch.nn layers that save their weight for their input's gradient
WEIGHT_SAVING = frozenset({
    "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "RNN", "LSTM", "GRU", "MultiheadAttention",
})
# torch.nn layers with parameters that require grad (their output does too)
PARAMETRIZED = WEIGHT_SAVING | {"Embedding", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "PReLU"}
MOVES = frozenset({"to", "cuda", "cpu", "train", "double", "float"})
MAX_DEPTH = 3  # classes looked into, nested
CUTS = re.compile(r"detach|no_grad|inference_mode|\.data\b|set_grad_enabled")


def saves_own_weights(ctx: FileContext, scope: Scope, func: ast.expr) -> bool:
    given = _given_for_life(ctx, scope, func)
    if given is not None:  # ``self.G = G`` given ``Trainer(G)``: the construction of that G, in its file
        ctx, scope, func = given
    construction = _construction(ctx, scope, func)
    return construction is not None and _saving(ctx, construction, MAX_DEPTH)


def _given_for_life(ctx: FileContext, scope: Scope, func: ast.expr) -> Optional[tuple[FileContext, Scope, ast.Name]]:
    """(file, scope, name) of the argument the class's one construction passes for ``self.G``
    (``project_life_field``) when it is a name of that scope's own (not a parameter there)."""
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == scope.self_name):
        return None
    given = project_life_field(ctx, scope, func)
    if given is None or not isinstance(given[2], ast.Name):
        return None
    args = getattr(given[1].node, "args", None)
    if args is not None and given[2].id in {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}:
        return None
    return given


def _construction(ctx: FileContext, scope: Scope, func: ast.expr) -> Optional[ast.Call]:
    """The one construction the called name is bound to: in the file (a plain name), or in the
    class of ``scope`` (``self.name``)."""
    name = dotted(func)
    if name is None:
        return None
    head, _, attr = name.partition(".")
    if attr and "." not in attr and head == scope.self_name and scope.class_node is not None:
        writes = attribute_writes(ctx, scope.class_node).get(attr, [])
        values = [v for w in writes for t in getattr(w.stmt, "targets", [None]) for v in _bound(t, w.value, name)]
        values = values if len(values) == len(writes) else []  # a write that is no plain assignment: unknown
    elif not attr:
        values = [value for a in statement_index(ctx).assigns for t in a.targets for value in _bound(t, a.value, name)]
    else:
        return None
    return _unmoved(values[0]) if len(values) == 1 else None


def _bound(target: ast.expr, value: ast.expr, name: str) -> list[ast.expr]:
    """What ``target = value`` binds to ``name`` (element-wise for ``a, b = A(), B()``)."""
    if isinstance(target, (ast.Name, ast.Attribute)):
        return [value] if dotted(target) == name else []
    if isinstance(target, (ast.Tuple, ast.List)):
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
            return [v for t, e in zip(target.elts, value.elts) for v in _bound(t, e, name)]
        return [value] if any(dotted(n) == name for n in walk(target)) else []  # unknown element: never one construction
    return []


def _unmoved(value: Optional[ast.expr]) -> Optional[ast.Call]:
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MOVES:
        value = value.func.value
    return value if isinstance(value, ast.Call) else None


def _layer(ctx: FileContext, construction: ast.Call) -> str:
    """``Linear`` for ``nn.Linear(...)`` / ``torch.nn.Linear(...)``; empty for anything else."""
    name = qualified(ctx, construction.func) or ""
    return name.rsplit(".", 1)[-1] if name.startswith("torch.nn.") and name.count(".") == 2 else ""


def _saving(ctx: FileContext, construction: ast.Call, depth: int) -> bool:
    layer = _layer(ctx, construction)
    if layer == "Sequential":
        return _chain_saves(ctx, list(construction.args), depth)
    cls = instance_class(ctx, construction)
    if cls is None or depth <= 0 or cls.name not in module_classes(ctx):
        return False
    forward = class_methods(ctx, cls).get("forward")
    return forward is not None and _forward_saves(ctx, cls, forward, depth - 1)


def _chain_saves(ctx: FileContext, layers: list[ast.expr], depth: int) -> bool:
    """In a chain of layers, a parametrized one comes before a weight-saving one (or one saves alone)."""
    seen_parameters = False
    for layer in _flat(ctx, layers):
        if not isinstance(layer, ast.Call):
            return False  # ``*blocks``, a name: unknown
        kind = _layer(ctx, layer)
        if kind in WEIGHT_SAVING and seen_parameters or _saving(ctx, layer, depth):
            return True
        seen_parameters |= kind in PARAMETRIZED
    return False


def _flat(ctx: FileContext, layers: list[ast.expr]) -> list[ast.expr]:
    """The layers of a chain, nested ``nn.Sequential`` chains opened in place."""
    return [inner for layer in layers for inner in (
        _flat(ctx, list(layer.args)) if isinstance(layer, ast.Call) and _layer(ctx, layer) == "Sequential" else [layer])]


def _forward_saves(ctx: FileContext, cls: ast.ClassDef, forward: Scope, depth: int) -> bool:
    """``forward`` calls a submodule that saves its own weights, or passes a parametrized
    submodule's output (directly or through its local names) into a weight-saving one. A forward
    that cuts anything (``detach``, ``no_grad``) is not read."""
    if ctx.mentions(forward.node, CUTS):
        return False
    layers = {}
    for node in scope_nodes(forward):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and dotted(node.func.value) == forward.self_name:
            construction = _construction(ctx, forward, node.func)
            if construction is not None:
                layers[id(node)] = (node, construction)
    if any(_saving(ctx, c, depth) for _, c in layers.values()):
        return True
    assigned: dict[str, list[ast.expr]] = {}
    for node in scope_nodes(forward):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for element in walk(target):
                    if isinstance(element, ast.Name):
                        assigned.setdefault(element.id, []).append(node.value)
    for call, construction in layers.values():
        if _layer(ctx, construction) in WEIGHT_SAVING and any(
            _from_parametrized(ctx, arg, layers, assigned, set()) for arg in [*call.args, *(k.value for k in call.keywords)]
        ):
            return True
    return False


def _from_parametrized(ctx: FileContext, expr: ast.expr, layers: dict, assigned: dict[str, list[ast.expr]], seen: set[str]) -> bool:
    for node in walk(expr):
        if isinstance(node, ast.Call) and id(node) in layers and _layer(ctx, layers[id(node)][1]) in PARAMETRIZED:
            return True
        if isinstance(node, ast.Name) and node.id in assigned and node.id not in seen:
            seen.add(node.id)
            if any(_from_parametrized(ctx, value, layers, assigned, seen) for value in assigned[node.id]):
                return True
    return False
