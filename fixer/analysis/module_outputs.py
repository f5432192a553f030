"""Whether the outputs of one module call share a graph that saved tensors.

``out = model(x)`` is taken for a forward pass whose parts share a graph only when the file shows
what ``model`` is: every assignment of that name in the file constructs one and the same module,
either of torch (``nn.Linear(...)``, ``nn.Sequential(...)``: one output tensor, or the parts of one
recurrence) or a class of this file whose ``forward`` can be read (also behind ``nn.DataParallel``
and ``DistributedDataParallel``). A name that only looks like a module (``model =
create_model(opt)``, ``self.network = config.network_fn()``) is unknown: nothing is shared.

A readable ``forward`` shares its outputs when every return gives one value carrying a saving
graph, or a tuple / list / dict (a literal, or a name built by ``.append`` and item stores) whose
elements all derive from one common saving origin. An element appended inside a loop stands for
every pass: only origins evaluated outside that loop are common to its values.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Optional, Union

from fixer.analysis.bindings import module_classes, module_parameter
from fixer.analysis.call_sites import argument_of, parameter_position
from fixer.analysis.class_model import held_for_life
from fixer.analysis.imported_definitions import imported_class
from fixer.analysis.importers import construction_arguments
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.names import dotted, qualified
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.scopes import LOOPS, RETURNS, Scope, nodes_of, scope_nodes, scopes, statement_index
from fixer.context import FileContext
from fixer.analysis.vocabulary import KEYED_ADDS, MERGES, SEQUENCE_ADDS, SEQUENCE_ADDS_ONE

TORCH = "torch"  # a module class of torch itself
WRAPPERS = frozenset(
    {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.DistributedDataParallel",
     "torch.nn.parallel.distributed.DistributedDataParallel"}
)
MOVES = ("to", "cuda", "cpu", "train", "eval", "double", "float", "half")
CONTAINERS = (ast.Tuple, ast.List, ast.Dict)
MAX_DEPTH = 3
# trace(ctx, forward, depth): the tracer of a forward's values to their origins, with .origins(...)
# and .saves(...); shared_graph's, handed in by its caller (the tracer asks this module about the
# module calls it meets, so this module cannot import it)
Trace = Callable[[FileContext, Scope, int], Any]


def outputs_share(ctx: FileContext, func: ast.expr, trace: Trace, depth: int = 0, scope: Optional[Scope] = None) -> Optional[bool]:
    """True/False when calling ``func`` is a known forward whose outputs do / do not share a
    saving graph; None when what ``func`` runs is unknown. A parameter of ``scope`` that the
    project's every call gives a module is judged by those modules (all agreeing). ``trace`` follows
    the values of a readable forward to their origins (shared_graph hands in its tracer)."""
    if scope is not None and isinstance(func, ast.Name) and depth < MAX_DEPTH:
        if module_parameter(ctx, scope, func.id):
            return _parameter_shares(ctx, scope, func.id, depth, trace)
    known = _class_shares(ctx, _resolve(ctx, dotted(func)), depth, trace)
    if known is None and scope is not None and scope.class_node is not None and depth < MAX_DEPTH:
        return _field_shares(ctx, scope, func, depth, trace)
    return known


def _class_shares(ctx: FileContext, resolved: Optional[str], depth: int, trace: Trace) -> Optional[bool]:
    """``outputs_share`` for a module of class ``resolved`` (as ``ctx`` names it)."""
    if resolved is None or depth >= MAX_DEPTH:
        return None
    if resolved == TORCH:
        return True
    forward = _forward(ctx, resolved)
    if forward is None:
        return None
    if forward == TORCH:
        return True
    return ctx.memo(("module_outputs_share", id(forward.node), depth), lambda: _forward_shares(ctx, forward, depth + 1, trace))


def _field_shares(ctx: FileContext, scope: Scope, func: ast.expr, depth: int, trace: Trace) -> Optional[bool]:
    """``self.net(x)`` in a method, the module kept for life as given to each construction of
    the class in the project (``Trainer(net)`` in the script importing it)."""
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == scope.self_name):
        return None
    given = construction_arguments(ctx, scope.class_node, func.attr)
    return _agreed(given or [], depth, trace)


def _agreed(arguments, depth: int, trace: Trace) -> Optional[bool]:
    """One answer for the modules given as ``arguments`` ((file, scope, expression) each)."""
    answers = set()
    for own, caller, argument in arguments:
        if isinstance(argument, ast.Call):
            answers.add(_class_shares(own, _constructed(own, argument, module_classes(own)), depth + 1, trace))
        else:
            answers.add(outputs_share(own, argument, trace, depth + 1, caller))
    return answers.pop() if len(answers) == 1 else None


def _parameter_shares(ctx: FileContext, scope: Scope, name: str, depth: int, trace: Trace) -> Optional[bool]:
    """Every call's argument for the parameter ``name``, judged in its caller's file."""
    position = parameter_position(scope, name)
    return _agreed(((own, caller, argument_of(call, name, position)) for own, caller, call in project_call_sites(ctx, scope)), depth, trace)


def _resolve(ctx: FileContext, name: Optional[str]) -> Optional[str]:
    """The one module class (``TORCH`` for torch's own) every assignment of ``name`` constructs."""
    if name is None:
        return None
    name = held_for_life(ctx).get(name, name)  # self.net given Trainer(net): net's construction
    kinds = _constructions(ctx).get(name)
    return next(iter(kinds)) if kinds and len(kinds) == 1 and None not in kinds else None


def _constructions(ctx: FileContext) -> dict[str, set[Optional[str]]]:
    def compute() -> dict[str, set[Optional[str]]]:
        classes = module_classes(ctx)
        found: dict[str, set[Optional[str]]] = {}
        for node in statement_index(ctx).assigns:
            for target in node.targets:
                name = dotted(target)
                if name:
                    found.setdefault(name, set()).add(_constructed(ctx, node.value, classes))
        return found

    return ctx.memo("module_outputs_constructions", compute)


def _constructed(ctx: FileContext, value: ast.expr, classes: set[str]) -> Optional[str]:
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MOVES:
        value = value.func.value
    if not isinstance(value, ast.Call):
        return None
    name = qualified(ctx, value.func) or ""
    if name in WRAPPERS:
        return _constructed(ctx, value.args[0], classes) if value.args else None
    if name.startswith("torch.nn.") and name.rsplit(".", 1)[-1][:1].isupper() and not name.endswith("Parameter"):
        return TORCH
    return name if name in classes else None


def _forward(ctx: FileContext, class_name: str, seen: Optional[set] = None) -> Union[Scope, str, None]:
    """The ``forward`` a module class runs (a class of this file or imported from another project
    file): its own, a base's, or torch's."""
    seen = seen if seen is not None else set()
    found = _class(ctx, class_name)
    if found is None or id(found[1]) in seen:
        return None
    home, cls = found
    seen.add(id(cls))
    for scope in scopes(home):
        if scope.class_node is cls and scope.node.name == "forward":
            return scope
    for base in cls.bases:
        base_name = qualified(home, base) or ""
        if base_name in module_classes(home):
            return _forward(home, base_name, seen)
        if base_name.startswith("torch.nn.") and base_name.rsplit(".", 1)[-1] != "Module":
            return TORCH  # e.g. a subclass of nn.Sequential that adds no forward
    return None


def _class(ctx: FileContext, class_name: str) -> Optional[tuple[FileContext, ast.ClassDef]]:
    """(file, class) that ``class_name`` names in ``ctx``: one class of this file, or an import."""
    matches = [c for c in statement_index(ctx).classes if c.name == class_name]
    if matches:
        return (ctx, matches[0]) if len(matches) == 1 else None
    return imported_class(ctx, class_name)


def _forward_shares(ctx: FileContext, forward: Scope, depth: int, trace: Trace) -> bool:
    tracer = trace(forward.ctx or ctx, forward, depth)
    ctx = forward.ctx or ctx
    returns = [n for n in nodes_of(forward, RETURNS) if isinstance(n, ast.Return) and n.value is not None]
    returns = [r for r in returns if not under_no_grad(ctx, r)]
    for ret in returns:
        elements = _elements(ctx, tracer, forward, ret.value, ret)
        if elements is None:  # one value: its parts share its graph if that graph saves
            if not (tracer.saves(ret.value, 0) or any(o.saves for o in tracer.origins(ret.value, ret, ()))):
                return False
            continue
        common = None
        for expr, at, loop in elements:
            origins = {o for o in tracer.origins(expr, at, ()) if o.saves and not (loop and _inside(ctx, o.stmt, loop))}
            common = origins if common is None else common & origins
        if not common:
            return False
    return bool(returns)


def _elements(ctx: FileContext, tracer, forward: Scope, value: ast.expr, at: ast.AST) -> Optional[list]:
    """The elements of a returned container as (expression, where evaluated, loop repeating it);
    None for a single value; [] (nothing provable) for a container changed in unknown ways."""
    if isinstance(value, (ast.Tuple, ast.List)):
        return [] if any(isinstance(e, ast.Starred) for e in value.elts) else [(e, at, None) for e in value.elts]
    if isinstance(value, ast.Dict):
        return [] if None in value.keys else [(v, at, None) for v in value.values]
    if not isinstance(value, ast.Name):
        return None
    defs = tracer.facts.reaching(value.id, at)
    if len(defs) != 1 or not isinstance(defs[0][1], CONTAINERS):
        return None
    stmt, literal = defs[0]
    elements = _elements(ctx, tracer, forward, literal, stmt)
    for node in scope_nodes(forward):
        added = _added(node, value.id)
        if added is False:
            return []
        if added is not None and (stmt.lineno, stmt.col_offset) < (node.lineno, node.col_offset) < (at.lineno, at.col_offset):
            loops = [p for p in ctx.ancestors(node) if isinstance(p, LOOPS) and not _inside(ctx, stmt, p)]
            elements.append((added, ctx.statement_of(node), loops[-1] if loops else None))
    return elements


def _added(node: ast.AST, name: str) -> Union[ast.expr, bool, None]:
    """The element ``node`` adds to the container ``name`` (``name.append(e)``, ``name[k] = e``),
    False if it changes the container otherwise, None if it does not touch it."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and dotted(node.func.value) == name:
        if node.func.attr in SEQUENCE_ADDS_ONE and len(node.args) == 1 and not node.keywords:
            return node.args[0]
        return False if node.func.attr in SEQUENCE_ADDS | MERGES | KEYED_ADDS else None
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if isinstance(target, ast.Subscript) and dotted(target.value) == name:
            return node.value
    if isinstance(node, ast.AugAssign) and dotted(node.target) == name:
        return False
    return None


def _inside(ctx: FileContext, node: ast.AST, container: ast.AST) -> bool:
    return any(parent is container for parent in ctx.ancestors(node))
