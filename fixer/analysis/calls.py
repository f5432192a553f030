"""Backward calls and optimizer calls, in every spelling real training code uses."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Iterator, Optional

from fixer.analysis.bindings import defined_functions
from fixer.analysis.callees import called_function, constructed_imports, names_constructing_imported
from fixer.analysis.held_values import held_name
from fixer.analysis.imported_definitions import imported_class, imported_definition_matches
from fixer.analysis.instance_methods import instance_method
from fixer.analysis.names import dotted, last_name, qualified, root_name, value_names
from fixer.analysis.project_text import STEP_CALL
from fixer.analysis.scalers import is_scaler
from fixer.analysis.call_sites import argument_of, parameter_position, path_instance
from fixer.analysis.class_model import attribute_writes
from fixer.analysis.project_callers import project_call_sites
from fixer.analysis.scopes import CALLS, RETURNS, Scope, nodes_of, scope_nodes, scope_of, scopes, statement_index
from fixer.analysis.slots import dict_slots, slot_name
from fixer.context import NOTHING, FileContext
from fixer.nodes import walk

AUTOGRAD_BACKWARD = ("torch.autograd.backward",)
AUTOGRAD_GRAD = ("torch.autograd.grad",)
# libraries whose objects' .backward(loss) backpropagates loss (accelerate, lightning fabric, deepspeed engines)
BACKWARD_LIBRARIES = ("accelerate.", "lightning.", "lightning_fabric.", "pytorch_lightning.", "deepspeed.")


@dataclass(frozen=True)
class BackwardCall:
    node: ast.expr  # the call; for a "helper" one, also the field read that hands back a freed graph
    target: ast.expr  # the tensor backpropagated from (the loss); a tuple/list for several
    kind: str  # "method", "autograd.backward", "autograd.grad", "owner" (accelerator.backward), "scaler"

    def keyword(self, name: str) -> Optional[ast.keyword]:
        return next((k for k in getattr(self.node, "keywords", ()) if k.arg == name), None)

    def flag(self, name: str) -> Optional[bool]:
        """Value of a constant keyword (``retain_graph=True`` -> True); None if absent or not constant."""
        keyword = self.keyword(name)
        if keyword is not None and isinstance(keyword.value, ast.Constant):
            return bool(keyword.value.value)
        return None

    @property
    def target_name(self) -> Optional[str]:
        return dotted(self.target)


def backward_call(ctx: FileContext, node: ast.AST) -> Optional[BackwardCall]:
    """The BackwardCall for ``node`` if it is one, else None."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    name = qualified(ctx, func)
    if name in AUTOGRAD_BACKWARD or name in AUTOGRAD_GRAD:
        target = node.args[0] if node.args else _keyword_value(node, "tensors" if name in AUTOGRAD_BACKWARD else "outputs")
        if target is None:
            return None
        return BackwardCall(node, target, "autograd.backward" if name in AUTOGRAD_BACKWARD else "autograd.grad")
    if not isinstance(func, ast.Attribute):
        return None
    receiver = func.value
    if func.attr == "manual_backward" and node.args:
        return BackwardCall(node, node.args[0], "owner")
    if func.attr != "backward" or instance_method(ctx, node) is not None:
        return None  # ``wrapper.backward(loss)``: a project method, not a tensor's (training_calls reads it)
    if node.args and dotted(receiver) in _backward_owners(ctx):
        return BackwardCall(node, node.args[0], "owner")
    if isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) and receiver.func.attr == "scale" and receiver.args:
        return BackwardCall(node, receiver.args[0], "scaler")  # scaler.scale(loss).backward()
    if _names_no_value(ctx, receiver):
        return None  # Function.backward(ctx, grad): an autograd.Function, not a tensor
    return BackwardCall(node, receiver, "method")


def retains_graph(call: BackwardCall) -> bool:
    """The call keeps its graph (retain_graph, its pre-0.4 name retain_variables, or create_graph, not constant False)."""
    for name in ("retain_graph", "retain_variables", "create_graph"):
        keyword = call.keyword(name)
        if keyword is not None and not (isinstance(keyword.value, ast.Constant) and not keyword.value.value):
            return True
    return False


def frees_graph(call: BackwardCall) -> bool:
    """The call frees what it traverses: no ``retain_graph``/``create_graph`` (or constant False),
    no ``**kwargs`` that may hold them."""
    return not retains_graph(call) and not any(k.arg is None for k in call.node.keywords)


def _backward_owners(ctx: FileContext) -> frozenset[str]:
    """Names this file binds to what such a library makes (``accelerator = Accelerator()``, the
    engine ``deepspeed.initialize(...)`` returns first), whatever the names are."""

    def compute() -> frozenset[str]:
        found = set()
        for assign in statement_index(ctx).assigns:
            value = assign.value
            if not (isinstance(value, ast.Call) and (qualified(ctx, value.func) or "").startswith(BACKWARD_LIBRARIES)):
                continue
            for target in assign.targets:
                found.add(dotted(target.elts[0] if isinstance(target, (ast.Tuple, ast.List)) and target.elts else target))
        return frozenset(found - {None})

    return ctx.memo("backward_owners", compute)


def _keyword_value(node: ast.Call, name: str) -> Optional[ast.expr]:
    return next((k.value for k in node.keywords if k.arg == name), None)


def _names_no_value(ctx: FileContext, node: ast.expr) -> bool:
    """Whether ``node`` is ``super()`` or a Name/Attribute chain whose first name the file never
    binds to a value (a class, a module, a function, or a name it cannot see): never by spelling."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super":
        return True
    root = root_name(node)
    return root is not None and root not in value_names(ctx)


BACKWARD_TEXT = re.compile(r"backward\s*\(|grad(?<!\wgrad)\s*\(")  # what backward_call can recognise
OPTIMIZER_TEXT = re.compile(r"zero_grad|\.step\b")
OPTIMIZER_CLASSES = re.compile(
    r"^(SGD|ASGD|Adam|AdamW|Adamax|Adagrad|Adadelta|NAdam|RAdam|RMSprop|Rprop|LBFGS|SparseAdam|Lion|LAMB|Lamb|Adafactor)$"
)


def backward_calls(ctx: FileContext, scope: Scope) -> list[BackwardCall]:
    """The scope's backward calls; a target read back from a holder (``out["loss"].backward()``
    after ``out = {"loss": loss}``) stands as the name it holds (held_values)."""
    def compute() -> list[BackwardCall]:
        return [BackwardCall(c.node, held_name(ctx, scope, c.target) or c.target, c.kind) for c in written_backward_calls(ctx, scope)]

    return ctx.memo(("backward_calls", id(scope.node)), compute)


def backward_calls_in(ctx: FileContext, scope: Scope, region: ast.AST) -> list[BackwardCall]:
    """The scope's backward calls inside ``region`` (a loop or block of the scope), in order: each
    call listed once a scope under every node around it, not a test of every call for each region."""

    def compute() -> dict[int, list[BackwardCall]]:
        under: dict[int, list[BackwardCall]] = {}
        for call in backward_calls(ctx, scope):
            for parent in ctx.ancestors(call.node):
                under.setdefault(id(parent), []).append(call)
        return under

    return ctx.memo(("backward_calls_in", id(scope.node)), compute).get(id(region), [])


def written_backward_calls(ctx: FileContext, scope: Scope) -> list[BackwardCall]:
    """The scope's backward calls with their targets as written."""

    def compute() -> list[BackwardCall]:
        if not ctx.mentions(scope.node, BACKWARD_TEXT):
            return []  # cheap gate: no need to walk a scope that never says "backward"
        return [call for node in nodes_of(scope, CALLS) if (call := backward_call(ctx, node)) is not None]

    return ctx.memo(("written_backward_calls", id(scope.node)), compute)


@dataclass(frozen=True)
class OptimizerCall:
    node: ast.Call
    kind: str  # "zero_grad" or "step"
    owner: str  # dotted name of the optimizer (or model, for model.zero_grad())
    via_scaler: bool = False  # scaler.step(optimizer)


def optimizer_call(ctx: FileContext, node: ast.AST) -> Optional[OptimizerCall]:
    """``opt.zero_grad()``, ``model.zero_grad()``, ``opt.step()``, ``scaler.step(opt)``.
    ``.step()`` counts only on names that look like optimizers (not schedulers or environments)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return None
    owner = dotted(node.func.value)
    if owner is None and (owner := slot_name(node.func.value)) not in _bound_optimizers(ctx):
        return None  # opts["d"].step(): only a slot the file fills with an optimizer
    if node.func.attr == "zero_grad":
        return OptimizerCall(node, "zero_grad", owner)
    if node.func.attr != "step":
        return None
    if is_scaler(ctx, node.func.value):
        inner = dotted(node.args[0]) if node.args else None
        return OptimizerCall(node, "step", inner, via_scaler=True) if inner else None
    if len(node.args) <= 1 and (owner in _bound_optimizers(ctx) or owner in _zeroed_and_stepped(ctx, node) or _given_optimizer(ctx, node, owner)):
        return OptimizerCall(node, "step", owner)
    return None


def _zeroed_and_stepped(ctx: FileContext, node: ast.AST) -> frozenset[str]:
    """Names that receive both ``.zero_grad()`` and a ``.step()`` of at most one argument in the
    function around ``node``: an optimizer's protocol (a module has no ``step``, a scheduler or an
    environment no ``zero_grad``), whatever the name."""
    function = next((a for a in ctx.ancestors(node) if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef))), ctx.tree)

    def compute() -> frozenset[str]:
        zeroed, stepped = set(), set()
        for call in walk(function):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and (owner := dotted(call.func.value)):
                if call.func.attr == "zero_grad":
                    zeroed.add(owner)
                elif call.func.attr == "step" and len(call.args) <= 1:
                    stepped.add(owner)
        return frozenset(zeroed & stepped)

    return ctx.memo(("zeroed_and_stepped", id(function)), compute)


def _given_optimizer(ctx: FileContext, node: ast.AST, owner: str) -> bool:
    """``owner`` is a parameter of the function around ``node`` that every call the project shows
    (in this file and in the files importing it; one at least) passes an optimizer: constructed in
    place or a name the caller's file binds to one; or a field that every write of an instance's
    class (``self.owner.optimizer``, call_sites.path_instance) sets to an optimizer's construction."""
    scope = scope_of(ctx, node)
    if "." in owner:
        prefix, _, attr = owner.rpartition(".")
        cls = path_instance(ctx, scope, prefix)
        writes = attribute_writes(ctx, cls).get(attr, []) if cls is not None else []
        return bool(writes) and all(is_optimizer_construction(ctx, w.value) for w in writes)
    if isinstance(scope.node, ast.Module) or parameter_position(scope, owner) is None:
        return False
    return ctx.memo(("given_optimizer", id(scope.node), owner), lambda: _every_call_passes_optimizer(ctx, scope, owner))


def _every_call_passes_optimizer(ctx: FileContext, scope: Scope, owner: str) -> bool:
    position, found = parameter_position(scope, owner), False
    for own, caller, call in project_call_sites(ctx, scope):
        argument = argument_of(call, owner, position) if call is not None and caller is not scope else None
        if not isinstance(argument, ast.expr) or isinstance(argument, ast.Starred):
            return False
        if not (is_optimizer_construction(own, argument) or dotted(argument) in _bound_optimizers(own)):
            return False
        found = True
    return found


def is_optimizer_construction(ctx: FileContext, value: ast.expr) -> bool:
    if not isinstance(value, ast.Call):
        return False
    name = qualified(ctx, value.func) or ""
    return name.startswith("torch.optim.") and not name.startswith("torch.optim.lr_scheduler") or bool(
        OPTIMIZER_CLASSES.match(last_name(value.func) or "")
    )


def _bound_optimizers(ctx: FileContext) -> frozenset[str]:
    """Names this file binds to an optimizer's construction, whatever the names are
    (``n3 = torch.optim.SGD(...)``), to another such name, to what a function of this file
    returns (``opt = self.optimizers()`` returning ``self._optimizer``), or a parameter that
    every call of its function in this file passes one (``train(net, opt)``); names alone say it
    only for the others."""
    def compute() -> frozenset[str]:
        optimizers: set[str] = set()
        assigns = [(a, dotted(a.targets[0])) for a in statement_index(ctx).assigns if len(a.targets) == 1]
        sites = _local_call_sites(ctx)
        callees = {id(call): callee for call, callee in sites}
        is_optimizer = lambda value: is_optimizer_construction(ctx, value) or dotted(value) in optimizers  # noqa: E731
        changed = True
        while changed:
            before = len(optimizers)
            for assign, name in assigns:
                if name and name not in optimizers and (is_optimizer(assign.value) or _returns_only(callees.get(id(assign.value)), is_optimizer)):
                    optimizers.add(name)
            optimizers |= _parameters_always_given(sites, is_optimizer)
            changed = len(optimizers) > before
        for assign in statement_index(ctx).assigns:  # self.opt = {"G": Adam(...), ...}: its slots
            optimizers |= {name for name, (value, _) in dict_slots(ctx, assign).items() if is_optimizer_construction(ctx, value)}
        return frozenset(optimizers)

    return ctx.memo("bound_optimizers", compute)


def _returns_only(callee: Optional[Scope], wanted) -> bool:
    """``callee`` (a function of this file) returns a ``wanted`` value on every return."""
    if callee is None:
        return False
    returns = [n.value for n in nodes_of(callee, RETURNS) if isinstance(n, ast.Return)]
    return bool(returns) and all(v is not None and wanted(v) for v in returns)


def _parameters_always_given(sites: list[tuple[ast.Call, Scope]], wanted) -> set[str]:
    """Parameters of this file's functions that every call of the function in this file (one at
    least) fills with a ``wanted`` value."""
    given: dict[tuple[int, str], list[bool]] = {}
    for call, callee in sites:
        params = [a.arg for a in callee.node.args.posonlyargs + callee.node.args.args]
        if callee.self_name and isinstance(call.func, ast.Attribute):
            params = params[1:]
        spread = any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)
        passed = {} if spread else dict(zip(params, call.args))
        passed.update((k.arg, k.value) for k in call.keywords if k.arg and not spread)
        for param in params:
            given.setdefault((id(callee.node), param), []).append(param in passed and wanted(passed[param]))
    return {param for (_, param), each in given.items() if each and all(each)}


def _local_call_sites(ctx: FileContext) -> list[tuple[ast.Call, Scope]]:
    """(call, function of this file it runs) for every call whose callee is known."""
    def compute() -> list[tuple[ast.Call, Scope]]:
        names = defined_functions(ctx)
        found = []
        for scope in scopes(ctx):
            for node in scope_nodes(scope):
                if isinstance(node, ast.Call) and last_name(node.func) in names:
                    callee = called_function(ctx, scope, node.func, imported=False)
                    if callee is not None and not isinstance(callee.node, ast.Module):
                        found.append((node, callee))
        return found

    return ctx.memo("local_call_sites", compute)


def optimizer_calls(ctx: FileContext, scope: Scope) -> list[OptimizerCall]:
    def compute() -> list[OptimizerCall]:
        if not ctx.mentions(scope.node, OPTIMIZER_TEXT):
            return []
        return [call for node in nodes_of(scope, CALLS) if (call := optimizer_call(ctx, node)) is not None]

    return ctx.memo(("optimizer_calls", id(scope.node)), compute)


def backpropagates_in(ctx: FileContext, scope: Scope, region: ast.AST) -> bool:
    """True if running ``region`` (a loop, or the scope itself) backpropagates: a backward call
    in it, or a call of a function of this file that makes one."""
    inside = region is scope.node
    if backward_calls(ctx, scope) if inside else backward_calls_in(ctx, scope, region):
        return True
    return any(_training_helper_calls(ctx, scope, region))


def backpropagating_nodes(ctx: FileContext, scope: Scope) -> list[ast.AST]:
    """Where the scope backpropagates: its backward calls, and its calls of a function of this
    file that makes one (``train_step(model, x)``, ``trainer.step()``)."""
    return [c.node for c in backward_calls(ctx, scope)] + list(_training_helper_calls(ctx, scope, scope.node))


def _training_helper_calls(ctx: FileContext, scope: Scope, region: ast.AST) -> Iterator[ast.Call]:
    if not training_functions(ctx) or not ctx.mentions(region, training_call_text(ctx)):
        return
    for node in scope_nodes(scope) if region is scope.node else walk(region):
        if isinstance(node, ast.Call):
            callee = called_function(ctx, scope, node.func, imported=False)
            if callee is not None and callee.node is not scope.node and backward_calls(callee.ctx or ctx, callee):
                yield node


def training_functions(ctx: FileContext) -> set[str]:
    """Names of this file's functions and methods that backpropagate themselves."""
    def compute() -> set[str]:
        return {
            s.node.name for s in scopes(ctx) if not isinstance(s.node, ast.Module) and backward_calls(ctx, s)
        }

    return ctx.memo("training_functions", compute)


def training_call_text(ctx: FileContext) -> "re.Pattern[str]":
    """Text that may call one of ``training_functions`` (a cheap gate before walking a scope)."""

    def compute() -> "re.Pattern[str]":
        names = sorted(training_functions(ctx) | imported_training_methods(ctx))
        return re.compile(r"\b(?:%s)\s*\(" % "|".join(map(re.escape, names))) if names else NOTHING

    return ctx.memo("training_call_text", compute)


def imported_training_methods(ctx: FileContext) -> set[str]:
    """Names of the methods that backpropagate themselves of the classes this file imports from
    other project files (``from agents import Agent`` ... ``agent.update(batch)``); only classes
    named in CapWords that the file constructs and whose text backpropagates are read."""
    def compute() -> set[str]:
        found: set[str] = set()
        constructed = constructed_imports(ctx)
        if not names_constructing_imported(ctx):
            return found  # cheap: the file constructs no imported class
        for node in statement_index(ctx).imports:
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias in node.names:
                local = ast.Name(id=alias.asname or alias.name, ctx=ast.Load())
                if local.id not in constructed or not alias.name[:1].isupper() or not imported_definition_matches(ctx, local, STEP_CALL, classes=True):
                    continue
                known = imported_class(ctx, qualified(ctx, local) or "")
                if known is not None:
                    home, cls = known
                    found |= {s.node.name for s in scopes(home) if s.class_node is cls and s.self_name and backward_calls(home, s)}
        return found

    return ctx.memo("imported_training_methods", compute)


def iter_calls(scope: Scope) -> Iterator[ast.Call]:
    for node in scope_nodes(scope):
        if isinstance(node, ast.Call):
            yield node
