"""The optimizer protocol of one training iteration: which optimizer owns which model's
parameters, which loops a step function runs in, and where a statement can be moved with the
comments attached to it (the order of its events is call_events.block_events)."""

from __future__ import annotations

import ast
import re
from typing import Iterator, Optional

from fixer.analysis.arguments import bound_arguments
from fixer.analysis.call_events import Event
from fixer.analysis.call_sites import call_sites
from fixer.analysis.calls import OPTIMIZER_TEXT, is_optimizer_construction, optimizer_call
from fixer.analysis.scalers import is_scaler
from fixer.analysis.class_model import held_for_life
from fixer.analysis.importers import importer_calls
from fixer.analysis.names import dotted, last_name, qualified
from fixer.analysis.flow import named_function
from fixer.analysis.passes import loop_of_pass
from fixer.analysis.slots import dict_slots, slot_name
from fixer.analysis.scopes import Scope, enclosing_loops, scope_statements, scopes, statement_index
from fixer.context import FileContext
from fixer.nodes import walk

BLOCK_FIELDS = ("body", "orelse", "finalbody")
MAX_HELPER_DEPTH = 2  # project helpers given the optimizer or its models, read this deep for .grad
PROTOCOL_CALLS = frozenset({"backward", "step", "zero_grad", "manual_backward"})  # a helper running one is no plain helper
# statements that may follow step() as part of one update: scaler.update(), scheduler.step()


def is_plain_step(step: Event) -> bool:
    """``opt.step()`` or ``scaler.step(opt)``; not ``opt.step(closure)``, which runs its own backward."""
    expected = 1 if step.spelling == "scaler" else 0
    return len(step.call.args) == expected and not step.call.keywords


def optimizer_scopes(ctx: FileContext) -> list[Scope]:
    """Scopes whose text mentions ``zero_grad`` or ``.step``, or names a function or method of the
    file whose text does (``self.optimizer_step()``): the only ones the 2xx rules look into."""

    def compute() -> list[Scope]:
        own = [s for s in scopes(ctx) if ctx.mentions(s.node, OPTIMIZER_TEXT)]
        names = sorted({s.node.name for s in own if not isinstance(s.node, ast.Module)})
        calling = re.compile(r"\b(?:%s)\s*\(" % "|".join(map(re.escape, names))) if names else None
        found = {id(s.node) for s in own}
        return [s for s in scopes(ctx) if id(s.node) in found or calling is not None and ctx.mentions(s.node, calling)]

    return ctx.memo("optimizer_scopes", compute)


def blocks(scope: Scope) -> Iterator[list[ast.stmt]]:
    """Every statement list of the scope: its body, and the bodies of its loops, ifs, withs, trys."""
    yield scope.body
    for node in scope_statements(scope):  # (never a nested function or class: scope_nodes' statements)
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for name in BLOCK_FIELDS:
                body = getattr(node, name, None)
                if body:
                    yield body
            for handler in getattr(node, "handlers", None) or ():
                yield handler.body


def is_loop_body(ctx: FileContext, block: list[ast.stmt]) -> bool:
    """``block`` is what each pass of a loop runs (its body, or its filter's body: ``passes.py``)."""
    return loop_of_pass(ctx, block) is not None


def call_loops(ctx: FileContext, scope: Scope) -> Optional[list[tuple[FileContext, Scope, ast.AST]]]:
    """When every use of the function or method of ``scope`` that the project shows (in this file,
    and for a module-level function in the files that import it) is a call inside a loop (``for
    batch in loader: train_step(batch)``), its body is one pass of those loops: (the caller's
    file, caller, innermost loop) per call. None when some use is not such a call, or there is none."""
    node = scope.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.decorator_list:
        return None
    found = []
    for caller, call in call_sites(ctx, scope):
        loops = enclosing_loops(ctx, ctx.statement_of(call), caller) if call is not None and caller is not scope else []
        if not loops:
            return None
        found.append((ctx, caller, loops[0]))
    for imported in importer_calls(ctx, scope):
        if imported.call is None:
            return None
        loops = enclosing_loops(imported.ctx, imported.ctx.statement_of(imported.call), imported.scope)
        if not loops:
            return None
        found.append((imported.ctx, imported.scope, loops[0]))
    return found or None


# --- which optimizer owns which parameters -------------------------------------------------


def optimizer_params(ctx: FileContext) -> dict[str, Optional[frozenset[str]]]:
    """Optimizer name (``opt``, ``self.optimizer``) -> the models whose ``.parameters()`` it was
    built from, or None when its parameters are not all ``model.parameters()`` calls. A name
    assigned several times gets the union (None if any is unknown)."""

    def compute() -> dict[str, Optional[frozenset[str]]]:
        owners: dict[str, Optional[frozenset[str]]] = {}
        for assign in statement_index(ctx).assigns:
            if len(assign.targets) != 1 or not is_optimizer_construction(ctx, assign.value):
                continue
            name = dotted(assign.targets[0])
            if name is None:
                continue
            models = _parameter_owners(ctx, assign)
            previous = owners.get(name, frozenset())
            owners[name] = None if models is None or previous is None else previous | models
        for assign in statement_index(ctx).assigns:  # self.opt = {k: Adam(n.parameters()) for k, n in self.nets.items()}
            for name, (value, bound) in dict_slots(ctx, assign).items():
                if is_optimizer_construction(ctx, value):
                    found = _params_of(value)
                    models = _models_in(ctx, assign, found, 0, bound) if found is not None else None
                    owners[name] = frozenset(models) if models else None
        _trainer_fields(ctx, owners)
        return owners

    return ctx.memo("optimizer_params", compute)


def _trainer_fields(ctx: FileContext, owners: dict[str, Optional[frozenset[str]]]) -> None:
    """``self.opt`` of a class the file constructs once as ``Trainer(opt, model)`` steps what
    ``opt`` steps, also under the names the object keeps the models by (``self.model``)."""
    fields = held_for_life(ctx)
    held = {name: field for field, name in fields.items()}
    for field, name in fields.items():
        if name in owners and field not in owners:
            models = owners[name]
            owners[field] = None if models is None else models | {held[m] for m in models if m in held}


def _params_of(call: ast.Call) -> Optional[ast.expr]:
    return call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "params"), None)


def _parameter_owners(ctx: FileContext, assign: ast.Assign) -> Optional[frozenset[str]]:
    call = assign.value
    assert isinstance(call, ast.Call)
    params = _params_of(call)
    if params is None:
        return None
    models = _models_in(ctx, assign, params, depth=2)
    if not models:
        return None
    return frozenset(models | _aliases(ctx, assign, models))


def _models_in(ctx: FileContext, assign: ast.Assign, params: ast.expr, depth: int, slots: Optional[dict[str, str]] = None) -> Optional[set[str]]:
    """The models whose ``.parameters()`` make up ``params``; a name is followed to its one
    assignment in the same function (``ge = chain(g.parameters(), e.parameters())``), so naming
    the list or writing it inline gives the same answer. None when some part is unknown."""
    models: set[str] = set()
    for node in walk(params):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("parameters", "named_parameters"):
            model = slot_name(node.func.value)
            if model is None:
                return None
            models.add((slots or {}).get(model, model))  # n.parameters() for n standing for self.nets['G']
        elif isinstance(node, ast.Name) and not _is_parameters_receiver(ctx, node, params):
            value = _single_assignment(ctx, assign, node.id) if depth > 0 else None
            inner = _models_in(ctx, assign, value, depth - 1) if value is not None else None
            if not inner:
                return None  # a parameter list built elsewhere: unknown
            models |= inner
    return models


def _single_assignment(ctx: FileContext, assign: ast.Assign, name: str) -> Optional[ast.expr]:
    """The value of the one ``name = ...`` before ``assign`` in its function (or module); None
    when it is assigned otherwise too (augmented, in a loop target, twice)."""
    scope = next((a for a in ctx.ancestors(assign) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module))), None)
    if scope is None:
        return None
    found = _bindings(ctx, scope).get(name, [])
    if len(found) != 1:
        return None
    target = found[0]
    parent = ctx.parent(target)
    if not (isinstance(parent, ast.Assign) and parent.targets == [target] and (parent.lineno, parent.col_offset) < (assign.lineno, assign.col_offset)):
        return None
    return parent.value


def _bindings(ctx: FileContext, scope: ast.AST) -> dict[str, list[ast.Name]]:
    """Every binding of each name below ``scope``, nested functions included (that only errs to
    "assigned more than once")."""

    def compute() -> dict[str, list[ast.Name]]:
        found: dict[str, list[ast.Name]] = {}
        for node in walk(scope):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                found.setdefault(node.id, []).append(node)
        return found

    return ctx.memo(("name_bindings", id(scope)), compute)


def _is_parameters_receiver(ctx: FileContext, name: ast.Name, root: ast.AST) -> bool:
    """``model`` in ``model.parameters()`` or ``model.head.parameters()``; builtins like ``list``."""
    if name.id in ("list", "dict", "filter", "chain", "itertools"):
        return True
    call = ctx.parent(name)
    if isinstance(call, ast.Call) and call.func is name and qualified(ctx, name) == "itertools.chain":
        return True  # ``from itertools import chain as ichain``
    node: ast.AST = name
    for parent in ctx.ancestors(name):
        if parent is root:
            break
        if isinstance(parent, ast.Attribute) or isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.slice, ast.Constant):
            node = parent  # model.head.parameters(), nets["G"].parameters()
            continue
        break
    return isinstance(node, ast.Attribute) and node.attr in ("parameters", "named_parameters")


def _aliases(ctx: FileContext, assign: ast.Assign, models: set[str]) -> set[str]:
    """``self.model`` for ``model`` when the function that builds the optimizer stores ``self.model = model``
    (or ``self.g, self.d = g, d``)."""
    function = next((a for a in ctx.ancestors(assign) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if function is None:
        return set()
    found = set()
    for node in walk(function):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        pairs = [(node.targets[0], node.value)]
        if isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple) and len(node.targets[0].elts) == len(node.value.elts):
            pairs = list(zip(node.targets[0].elts, node.value.elts))  # ``self.g, self.d = g, d``
        for target, value in pairs:
            if dotted(value) in models and dotted(target):
                found.add(dotted(target))
    return found


def _related(a: str, b: str) -> bool:
    """One module is the other or contains it by attribute path (``model`` / ``model.head``)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def zeroes_for(ctx: FileContext, zeroed: str, optimizer: str) -> Optional[bool]:
    """Does ``zeroed.zero_grad()`` clear the gradients ``optimizer.step()`` uses? True / False when
    known, None when the analysis cannot tell."""
    if zeroed == optimizer:
        return True
    owners = optimizer_params(ctx)
    stepped = owners.get(optimizer)
    if zeroed in owners:  # another optimizer
        other = owners[zeroed]
        if stepped is None or other is None:
            return None
        return any(_related(a, b) for a in stepped for b in other)
    if stepped is None:
        return None
    return True if any(_related(zeroed, model) or zeroed.startswith(model + ".") for model in stepped) else None


def is_update_companion(ctx: FileContext, stmt: ast.stmt) -> bool:
    """``scaler.update()`` or ``scheduler.step()``: an update with no arguments that is no optimizer
    step (calls.optimizer_call), whatever its receiver is called; it belongs right after the step."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)):
        return False
    call = stmt.value
    return call.func.attr in ("update", "step") and not call.args and not call.keywords and optimizer_call(ctx, call) is None


def scope_for(ctx: FileContext, node: ast.AST) -> Optional[Scope]:
    """The scope whose own body holds ``node``."""
    for parent in ctx.ancestors(node):
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            return next((s for s in scopes(ctx) if s.node is parent), None)
    return None


# --- statements that may read or write gradients --------------------------------------------

HARMLESS_GRAD_CALLS = frozenset(
    {"clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "requires_grad_", "no_grad", "enable_grad", "set_grad_enabled"}
)


def touches_grads(ctx: FileContext, stmt: ast.stmt, objects: set[str], depth: int = MAX_HELPER_DEPTH) -> bool:
    """True if ``stmt`` may read or write ``.grad`` other than by clipping: a ``.grad`` attribute,
    a call whose name says ``grad`` (``apply_grads``), or a helper that receives one of ``objects``
    (the optimizer, its models) as an argument, unless it is a project function (of this file or
    another) whose own statements do none of this with the parameters given them, nor step,
    zero or backpropagate (``compute_loss(model, x, y)``)."""
    for node in walk(stmt):
        if isinstance(node, ast.Attribute) and node.attr in ("grad", "_grad", "main_grad"):
            return True
        if not isinstance(node, ast.Call):
            continue
        name = last_name(node.func) or ""
        if "grad" in name and name not in HARMLESS_GRAD_CALLS and name != "zero_grad":
            return True
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        if receiver is not None and is_scaler(ctx, receiver):
            continue  # scaler.step(opt), scaler.unscale_(opt)
        if (qualified(ctx, node.func) or "").startswith("torch."):
            continue
        arguments = list(node.args) + [k.value for k in node.keywords]
        if any(dotted(arg) in objects for arg in arguments) and _helper_touches(ctx, node, objects, depth):
            return True
    return False


def _helper_touches(ctx: FileContext, call: ast.Call, objects: set[str], depth: int) -> bool:
    helper = named_function(ctx, call) if depth > 0 else None
    if helper is None or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return True
    if any(isinstance(n, ast.Call) and last_name(n.func) in PROTOCOL_CALLS for n in walk(helper.node)):
        return True
    given = {param for param, arg in bound_arguments(helper, call) if dotted(arg) in objects}
    return any(touches_grads(helper.ctx or ctx, s, given, depth - 1) for s in helper.node.body)
