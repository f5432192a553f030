"""What a carried value is before the first iteration and whether it is a tensor or a tuple of
tensors (an LSTM's ``(h, c)``): the fix ``hidden.detach()`` needs a tensor,
``tuple(h.detach() for h in hidden)`` a tuple. Unknown when the code does not say."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Optional

from fixer.analysis.call_sites import argument_of, call_sites, parameter_position
from fixer.analysis.carried_flow import end_position, inside, position
from fixer.analysis.arguments import bound_arguments
from fixer.analysis.callees import instance_class
from fixer.analysis.class_model import class_methods, construction_argument
from fixer.analysis.graph import CREATION, GraphFacts, facts
from fixer.analysis.imported_definitions import imported_class
from fixer.analysis.module_forwards import forward_scope, given_for_life
from fixer.analysis.names import dotted, qualified
from fixer.analysis.scopes import RETURNS, Scope, enclosing_loops, nodes_of, scope_nodes, scope_of, scopes, statement_index
from fixer.context import FileContext

if TYPE_CHECKING:
    from fixer.analysis.carried import Iteration

TUPLE_MODULES = re.compile(r"^torch\.nn\.(LSTM|LSTMCell)$")
TENSOR_MODULES = re.compile(r"^torch\.nn\.(GRU|RNN|GRUCell|RNNCell|Linear|Conv\dd|Embedding|Sequential)$")
RECURRENT = re.compile(r"^torch\.nn\.(LSTM|GRU|RNN)$")
TUPLE_RETURNING = frozenset({"chunk", "split", "unbind", "tensor_split", "max", "min", "sort", "topk", "kthvalue", "mode", "median", "lstm", "gru", "qr", "svd", "eig", "std_mean", "var_mean", "aminmax", "unique"})
SHAPE_DEPTH = 6  # names and returns followed: the caller's name, the step function's return, the model's forward
NEW_TENSOR = frozenset({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "zeros_like", "ones_like", "clone"})


def class_init_values(ctx: FileContext, scope: Scope, method: str) -> dict[str, ast.expr]:
    """``self.x = value`` assignments in ``method`` of ``scope``'s class, keyed with ``scope``'s
    own name for ``self``."""
    found: dict[str, ast.expr] = {}
    for other in scopes(ctx):
        if other.class_node is None or other.class_node is not scope.class_node or other.node.name != method:
            continue
        for node in scope_nodes(other):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    name = dotted(target)
                    if name and name.startswith(f"{other.self_name}.") and name.count(".") == 1:
                        found[f"{scope.self_name}.{name.split('.', 1)[1]}"] = node.value
    return found


def initial_value(ctx: FileContext, scope: Scope, graph: GraphFacts, it: "Iteration", name: str) -> tuple[Optional[ast.expr], bool]:
    """(value before the first pass, whether the name surely exists then). A parameter exists
    with an unknown value (None, True), or with what the caller's loop starts it as when the
    function is the caller's iteration (``total = 0`` before ``for ...: total = step(x, total)``)."""
    found = _value_before(ctx, graph, it.node, name)
    if found is not None:
        return found
    if scope.self_name and name.startswith(f"{scope.self_name}."):
        value = class_init_values(ctx, scope, "__init__").get(name)
        constructed = construction_argument(ctx, scope.class_node, name.split(".", 1)[1], for_life=False) if value is not None else None
        if isinstance(constructed, ast.Name):  # Trainer(hidden) with hidden = None where it is constructed
            defs = facts(ctx, scope_of(ctx, constructed)).reaching(constructed.id, constructed)
            constructed = defs[0][1] if len(defs) == 1 and defs[0][1] is not None else constructed
        return constructed or value, value is not None  # Trainer(hidden=None): what __init__ was given
    node = scope.node
    if not isinstance(node, ast.Module) and name in {a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs}:
        return (initial_argument(ctx, scope, name) if it.node is node else None), True
    return _constructed_field(ctx, graph, it.node, name) or (None, False)


def _constructed_field(ctx: FileContext, graph: GraphFacts, loop: ast.AST, name: str) -> Optional[tuple[Optional[ast.expr], bool]]:
    """A field of an object the scope constructs before the loop (``state = State(h0)``, its last
    binding there) whose class, of this file or another project file, sets it in the body of ``__init__`` on every
    construction (``self.hidden = hidden``): what the construction gives it (the argument for a
    parameter stored as it is, else the value ``__init__`` stores), and whether the construction
    surely runs before the loop."""
    owner, _, attr = name.partition(".")
    before = _value_before(ctx, graph, loop, owner) if attr and "." not in attr else None
    made = before[0] if before is not None and isinstance(before[0], ast.Call) else None
    local = instance_class(ctx, made)
    home, cls = (ctx, local) if local is not None or made is None else imported_class(ctx, qualified(ctx, made.func) or "") or (ctx, None)
    init = class_methods(home, cls).get("__init__") if cls is not None else None
    if init is None or init.self_name is None:
        return None
    field = f"{init.self_name}.{attr}"
    stores = [n for n in scope_nodes(init) if isinstance(n, ast.Assign) and any(dotted(t) == field for t in n.targets)]
    own = [n for n in stores if any(n is s for s in init.body)]
    if not own:
        return None
    last = own[-1]
    if last is not stores[-1] or any(isinstance(t, (ast.Tuple, ast.List)) for t in last.targets):
        return None, before[1]  # (stored again under a condition, or unpacked: its value unknown)
    given = dict(bound_arguments(init, before[0])).get(last.value.id) if isinstance(last.value, ast.Name) else None
    return given or last.value, before[1]


def _value_before(ctx: FileContext, graph: GraphFacts, loop: ast.AST, name: str) -> Optional[tuple[Optional[ast.expr], bool]]:
    """The last assignment of ``name`` before ``loop`` (value, whether it surely runs), if any."""
    before = [
        (s, v)
        for s, v in graph.assignments.get(name, [])
        if not inside(ctx, s, loop) and s is not loop and end_position(s) <= position(loop)
    ]
    if not before:
        return None
    stmt, value = sorted(before, key=lambda d: position(d[0]))[-1]
    return value, _block_encloses(ctx, stmt, loop)


def initial_argument(ctx: FileContext, scope: Scope, name: str) -> Optional[ast.expr]:
    """What the parameter ``name`` is on the first call: the value the one caller's loop starts
    the argument it passes as (``total = 0`` before ``for ...: total = step(x, total)``)."""
    position_ = parameter_position(scope, name)
    sites = list(call_sites(ctx, scope)) if position_ is not None else []
    if len(sites) != 1 or sites[0][1] is None:
        return None
    caller, call = sites[0]
    argument = argument_of(call, name, position_)
    loops = enclosing_loops(ctx, ctx.statement_of(call), caller)
    if not isinstance(argument, ast.Name) or not loops:
        return None
    found = _value_before(ctx, facts(ctx, caller), loops[0], argument.id)
    return found[0] if found is not None and found[1] else None


def _block_encloses(ctx: FileContext, stmt: ast.AST, loop: ast.AST) -> bool:
    """The assignment runs whenever the loop is reached: it sits in a block around the loop."""
    parent = ctx.parent(stmt)
    while isinstance(parent, (ast.With, ast.AsyncWith)) or isinstance(parent, ast.Try) and stmt in parent.body:
        stmt, parent = parent, ctx.parent(parent)
    for field in ("body", "orelse", "finalbody"):
        block = getattr(parent, field, None) or []
        if any(s is stmt for s in block):
            return any(s is loop or inside(ctx, loop, s) for s in block)
    return False


def shape_of(ctx: FileContext, graph: GraphFacts, values: list[ast.expr], initial: Optional[ast.expr]) -> str:
    shapes = {_shape(ctx, graph, v, 0) for v in [*values, initial] if v is not None and not _is_none(v)}
    shapes.discard("unknown")  # the same variable goes back into the same call: one shape
    if shapes == {"tensor"}:
        return "tensor"
    if shapes == {"tuple"}:
        return "tuple"
    if shapes == {"dict"}:
        return "dict"
    return "unknown"


def _is_none(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and value.value is None


def _shape(ctx: FileContext, graph: GraphFacts, value: ast.expr, depth: int) -> str:
    if isinstance(value, (ast.Tuple, ast.List)):
        return "tuple" if len(value.elts) > 1 else "unknown"
    if isinstance(value, (ast.BinOp, ast.UnaryOp)):
        return "tensor"
    if isinstance(value, ast.Dict) and value.values and None not in value.keys:  # {"h": h, "c": c}: a dict of tensors
        return "dict" if all(_shape(ctx, graph, v, depth + 1) == "tensor" for v in value.values) else "unknown"
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Call) and isinstance(value.slice, ast.Constant):
        module = _module_class(ctx, value.value.func)
        if module and RECURRENT.match(module):
            if value.slice.value == 0:
                return "tensor"
            return "tuple" if TUPLE_MODULES.match(module) else "tensor"
        if module and module.endswith("LSTMCell"):
            return "tensor"
        forward = forward_scope(ctx, value.value.func) or graph._local_function(value.value.func)
        if forward is not None and depth < SHAPE_DEPTH:  # a module's forward, or a function of this file
            return _returned_shape(ctx, forward, value.slice.value, depth + 1)
        return "tensor" if _tensor_tuple(ctx, graph, value.value, depth) else "unknown"
    if isinstance(value, (ast.Name, ast.Attribute)) and dotted(value) and depth < SHAPE_DEPTH:  # x, self.x
        defs = graph.reaching(dotted(value), value)
        shapes = {_shape(ctx, graph, v, depth + 1) for _, v in defs if v is not None}
        return shapes.pop() if len(shapes) == 1 else "unknown"
    if isinstance(value, ast.Call):
        return _call_shape(ctx, graph, value, depth)
    return "unknown"


def _tensor_tuple(ctx: FileContext, graph: GraphFacts, call: ast.Call, depth: int) -> bool:
    """A torch operation returning a tuple of tensors (``torch.chunk(x, 2)``, ``h.chunk(2)`` of a
    tensor ``h``, ``x.max(-1)``): each element is a tensor."""
    func = call.func
    short = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if short not in TUPLE_RETURNING or short in ("lstm", "gru"):
        return False
    if (qualified(ctx, func) or "").startswith("torch."):
        return True
    return isinstance(func, ast.Attribute) and depth < SHAPE_DEPTH and _shape(ctx, graph, func.value, depth + 1) == "tensor"


def _call_shape(ctx: FileContext, graph: GraphFacts, call: ast.Call, depth: int = 0) -> str:
    module = _module_class(ctx, call.func)
    if module:
        if TUPLE_MODULES.match(module) and module.endswith("Cell"):
            return "tuple"
        return "tensor" if TENSOR_MODULES.match(module) else "unknown"
    name = qualified(ctx, call.func) or ""
    short = name.rsplit(".", 1)[-1] if name else (call.func.attr if isinstance(call.func, ast.Attribute) else "")
    if CREATION.match(name) or short in NEW_TENSOR:
        return "tensor"
    if name.startswith("torch.") and short not in TUPLE_RETURNING:
        return "tensor"
    local = graph._local_function(call.func)
    if local is not None:
        returns = [n.value for n in nodes_of(local, RETURNS) if isinstance(n, ast.Return) and n.value is not None]
        if returns and all(isinstance(r, ast.Tuple) and len(r.elts) > 1 for r in returns):
            return "tuple"
        if returns and depth < SHAPE_DEPTH:  # one shape for every return: ``return {"h": h}``
            own = local.ctx or ctx
            shapes = {_shape(own, facts(own, local), r, depth + 1) for r in returns}
            return shapes.pop() if len(shapes) == 1 else "unknown"
    return "unknown"


def _module_class(ctx: FileContext, func: ast.expr) -> Optional[str]:
    """``torch.nn.LSTM`` for a callee assigned ``nn.LSTM(...)`` somewhere in the file."""
    name = dotted(func)
    if name is None:
        return None
    attr = name.split(".", 1)[1] if name.startswith("self.") else None
    given = given_for_life(ctx, attr)
    if given is not None:
        return _module_class(ctx, given)
    for node in statement_index(ctx).assigns:
        if not isinstance(node.value, ast.Call):
            continue
        for target in node.targets:
            target_name = dotted(target)
            if target_name == name or attr and target_name and target_name.endswith(f".{attr}") and target_name.count(".") == 1:
                constructed = qualified(ctx, node.value.func) or ""
                if constructed.startswith("torch.nn."):
                    return constructed
    return None


def returned_elements(scope: Scope, index: int) -> Optional[list[tuple[ast.Return, ast.expr]]]:
    """Element ``index`` of every ``return`` of ``scope``, if every return is a long enough tuple."""
    returns = [n for n in nodes_of(scope, RETURNS) if isinstance(n, ast.Return) and n.value is not None]
    if not returns or not all(isinstance(r.value, ast.Tuple) and len(r.value.elts) > index for r in returns):
        return None
    return [(r, r.value.elts[index]) for r in returns]


def _returned_shape(ctx: FileContext, scope: Scope, index: int, depth: int) -> str:
    elements = returned_elements(scope, index)
    if not elements:
        return "unknown"
    own = scope.ctx or ctx  # a forward of another project file is read in its own file
    shapes = {_shape(own, facts(own, scope), element, depth) for _, element in elements}
    return shapes.pop() if len(shapes) == 1 else "unknown"
