"""Which values carry an autograd graph.

``kind(expr, at)`` answers NONE (plain numbers, detached or no-grad values, data batches), LEAF (a
parameter or ``requires_grad=True`` tensor: operations on it build a graph), GRAPH (the result of
operations that recorded a graph) or UNKNOWN (a call we cannot see into). It is flow-aware within
a scope: a name's value is the one assigned most recently before the use. ``carries_graph`` is the
conservative question the rules ask: GRAPH, or UNKNOWN but backpropagated through in this scope."""

from __future__ import annotations

import ast
import enum
import re
from typing import Optional

from fixer.analysis.arguments import bound_arguments
from fixer.analysis.assignments import scope_assignments
from fixer.analysis.callees import called_function
from fixer.analysis.calls import AUTOGRAD_BACKWARD, AUTOGRAD_GRAD, written_backward_calls
from fixer.analysis.evidence import built_graph
from fixer.analysis.grad_flips import flipped_before
from fixer.analysis.held_values import held_name
from fixer.analysis.module_forwards import forward_scope
from fixer.analysis.module_values import PARAMETER, holds_module, module_argument
from fixer.analysis.names import dotted, qualified
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.parameter_collections import PARAMETER as A_PARAMETER, loop_element
from fixer.analysis.placed import Placed
from fixer.analysis.scopes import RETURNS, Scope, is_self_attribute, nodes_of
from fixer.analysis.vocabulary import constructs_torch_nn_class
from fixer.context import FileContext
from fixer.nodes import walk


class Kind(enum.IntEnum):
    NONE = 0
    UNKNOWN = 1
    LEAF = 2
    GRAPH = 3


NON_SAVING = frozenset(  # operations that save no tensor for backward
    {"add", "sub", "neg", "sum", "mean", "view", "reshape", "flatten", "squeeze", "unsqueeze", "permute",
     "transpose", "t", "contiguous", "clone", "expand", "expand_as", "repeat", "cat", "stack", "chunk", "split",
     "narrow", "select", "float", "double", "half", "to", "cpu", "cuda", "view_as", "reshape_as", "unbind",
     "requires_grad_", "type_as", "squeeze_", "unsqueeze_"}
)
DETACHING_METHODS = frozenset(
    {"detach", "item", "tolist", "numpy", "data_ptr", "size", "dim", "numel", "nelement", "element_size",
     "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite",
     "is_contiguous", "get_device", "stride", "storage_offset", "state_dict", "parameters",
     "named_parameters", "keys", "values", "items"}
)
DETACHING_ATTRIBUTES = frozenset({"data", "grad", "shape", "dtype", "device", "requires_grad", "ndim", "is_leaf", "T_max"})
PLAIN_BUILTINS = frozenset({"float", "int", "bool", "str", "len", "repr", "format", "print", "isinstance", "range", "enumerate", "zip"})
CONTAINER_BUILTINS = frozenset({"tuple", "list"})  # hold what their argument holds
CREATION = re.compile(  # (the legacy constructors and ``Variable(t)``, which makes a new leaf of ``t``'s data, too)
    r"^torch\.((zeros|ones|empty|full|rand|randn|randint|randperm|tensor|as_tensor|from_numpy|arange|linspace|logspace|eye)(_like)?"
    r"|(Float|Double|Half|BFloat16|Long|Int|Short|Byte|Char|Bool)?Tensor|autograd\.(variable\.)?Variable)$"
)
PARAMETER_CLASSES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter"})  # a new leaf of its data
# torch.Tensor methods that carry the graph along: on an object known only by its `.backward()` call
# (maybe a duck-typed loss wrapper), other methods return unknown
TENSOR_METHODS = frozenset(
    {"abs", "add", "sub", "mul", "div", "pow", "sqrt", "exp", "log", "neg", "mean", "sum", "prod", "max", "min",
     "norm", "std", "var", "view", "reshape", "flatten", "squeeze", "unsqueeze", "expand", "permute", "transpose",
     "t", "contiguous", "clone", "to", "cpu", "cuda", "float", "double", "half", "type", "type_as", "clamp",
     "matmul", "mm", "bmm", "sigmoid", "tanh", "relu", "softmax", "log_softmax", "gather", "index_select",
     "masked_fill", "repeat", "split", "chunk", "select", "narrow", "square", "logsumexp", "cumsum"}
)


def _max(kinds) -> Kind:
    return max(kinds, default=Kind.NONE)


class GraphFacts:
    """Graph-carrying facts for one scope."""

    def __init__(self, ctx: FileContext, scope: Scope, bound: Optional[dict[str, Kind]] = None, modules: frozenset[str] = frozenset()):
        self.ctx = ctx
        self.scope = scope
        self.bound = bound or {}  # parameters a caller's arguments give a graph (a call's summary)
        self.modules = modules  # ... and those it gives a module
        self.bindings = scope_assignments(ctx, scope)  # (shared with every other asker of the scope's bindings)
        self.assignments = self.bindings.assignments
        self.backwarded: set[str] = set()
        self._name_kinds: dict[tuple[str, int], Kind] = {}
        self._query_kinds: dict[tuple[str, int], Kind] = {}
        self._duck_typed: set[tuple[str, int]] = set()
        self._bound: list[dict[str, ast.expr]] = []  # comprehension variables -> their iterables
        self._collect()

    # -- facts -----------------------------------------------------------------------------
    def _collect(self) -> None:
        for call in written_backward_calls(self.ctx, self.scope):
            targets = call.target.elts if isinstance(call.target, (ast.Tuple, ast.List)) else [call.target]
            for target in targets:
                name = dotted(target)
                if name:
                    self.backwarded.add(name)

    def reaching(self, name: str, at: ast.AST) -> list[tuple[ast.AST, Optional[ast.expr]]]:
        """The scope's ``reaching`` (assignments.Assignments)."""
        return self.bindings.reaching(name, at)

    def placed(self, name: str) -> Placed:
        return self.bindings.placed(name)

    def assigned_within(self, node: ast.AST) -> list[tuple[str, tuple[ast.AST, Optional[ast.expr]]]]:
        return self.bindings.assigned_within(node)

    # -- questions -------------------------------------------------------------------------
    def kind(self, expr: Optional[ast.expr], at: Optional[ast.AST] = None, _seen: Optional[set] = None) -> Kind:
        if expr is None:
            return Kind.NONE
        if _seen is None:
            self._query_kinds = {}
        seen = _seen if _seen is not None else set()
        at = at or expr
        if isinstance(expr, ast.Constant) or isinstance(expr, (ast.JoinedStr, ast.Compare, ast.BoolOp, ast.SetComp, ast.Set)):
            return Kind.NONE
        held = held_name(self.ctx, self.scope, expr) if isinstance(expr, (ast.Subscript, ast.Attribute)) else None
        if held is not None:  # out["loss"] after out = {"loss": loss}: the value of loss
            return self._kind_of_name(held, at, seen)
        if isinstance(expr, (ast.Name, ast.Attribute)):
            return self._kind_of_name(expr, at, seen)
        if isinstance(expr, ast.Call):
            return self._kind_of_call(expr, at, seen)
        if under_no_grad(self.ctx, expr):
            return Kind.NONE
        if isinstance(expr, ast.BinOp):
            return _promote(_max([self.kind(expr.left, at, seen), self.kind(expr.right, at, seen)]))
        if isinstance(expr, ast.UnaryOp):
            return Kind.NONE if isinstance(expr.op, ast.Not) else _promote(self.kind(expr.operand, at, seen))
        if isinstance(expr, ast.Subscript):
            element = self._returned_element(expr, seen)
            return element if element is not None else _promote(self.kind(expr.value, at, seen))
        if isinstance(expr, ast.IfExp):
            return _max([self.kind(expr.body, at, seen), self.kind(expr.orelse, at, seen)])
        if isinstance(expr, (ast.Tuple, ast.List)):
            return _max(self.kind(e, at, seen) for e in expr.elts)
        if isinstance(expr, ast.Dict):  # a container holds what its values hold
            return _max(self.kind(v, at, seen) for v in expr.values)
        if isinstance(expr, ast.Starred):
            return self.kind(expr.value, at, seen)
        if isinstance(expr, ast.NamedExpr):
            return self.kind(expr.value, at, seen)
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.DictComp)):
            return self._comprehension(expr, at, seen)
        return Kind.NONE

    def _comprehension(self, expr: ast.expr, at: ast.AST, seen: set) -> Kind:
        """What the elements hold; a comprehension variable holds what its iterable's elements do."""
        bound = {n.id: g.iter for g in expr.generators for n in walk(g.target) if isinstance(n, ast.Name)}
        self._bound.append(bound)
        try:
            return self.kind(expr.value if isinstance(expr, ast.DictComp) else expr.elt, at, seen)
        finally:
            self._bound.pop()

    def _comprehension_variable(self, name: str) -> Optional[tuple[int, ast.expr]]:
        root = name.split(".")[0]
        for depth in range(len(self._bound) - 1, -1, -1):
            if root in self._bound[depth]:
                return depth, self._bound[depth][root]
        return None

    def _kind_of_name(self, expr: ast.expr, at: ast.AST, seen: set) -> Kind:
        if isinstance(expr, ast.Attribute) and expr.attr in DETACHING_ATTRIBUTES and not is_self_attribute(self.ctx, expr):
            return Kind.NONE
        name = dotted(expr)
        if name is None:  # attribute of a call result etc.
            return self.kind(expr.value, at, seen) if isinstance(expr, ast.Attribute) else Kind.NONE
        variable = self._comprehension_variable(name) if self._bound else None
        if variable is not None:  # judged by its iterable, with the names visible there
            depth, iterable = variable
            outer, self._bound = self._bound, self._bound[:depth]
            try:
                return self.kind(iterable, at, seen)
            finally:
                self._bound = outer
        key = (name, id(at))
        if key in self._name_kinds:
            return self._name_kinds[key]
        if key in self._query_kinds:
            return self._query_kinds[key]
        if key in seen:
            return Kind.NONE  # a cycle (a value carried around a loop): the other definitions decide
        seen.add(key)
        defs = self.reaching(name, at)
        if defs:
            result = _max(self._kind_of_definition(name, stmt, value, seen) for stmt, value in defs)
        else:
            result = self.bound.get(name, Kind.UNKNOWN if "." in name or name in self._parameters() else Kind.NONE)
        if result == Kind.NONE and defs and flipped_before(self.ctx, self.scope, name, at):
            result = Kind.LEAF  # ``C = torch.randn(...)``, then ``for p in [C, W]: p.requires_grad = True``
        if result == Kind.UNKNOWN and name in self.backwarded:
            result = Kind.GRAPH
            self._duck_typed.add(key)  # known only by its `.backward()`: maybe not a tensor
        seen.discard(key)
        if not seen:  # only results not cut short by a cycle are final ...
            self._name_kinds[key] = result
        self._query_kinds[key] = result  # ... the others hold for the rest of this question
        return result

    def _kind_of_definition(self, name: str, stmt: ast.AST, value: Optional[ast.expr], seen: set) -> Kind:
        if value is None and isinstance(stmt, (ast.For, ast.AsyncFor)) and "parameters(" in self.ctx.source:
            return Kind.LEAF if self._loops_over_parameters(stmt, name) else Kind.NONE  # else: batches, no graph
        return self.kind(value, stmt, seen)

    def _loops_over_parameters(self, loop: ast.AST, name: str) -> bool:
        key = ("loop_element", id(loop), name)
        return self.ctx.memo(key, lambda: loop_element(self.ctx, self.scope, loop, name) == A_PARAMETER)

    def _parameters(self) -> set[str]:
        node = self.scope.node
        if isinstance(node, ast.Module):
            return set()
        args = node.args
        return {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}

    def _kind_of_call(self, call: ast.Call, at: ast.AST, seen: set) -> Kind:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in DETACHING_METHODS:
            return Kind.NONE
        name = qualified(self.ctx, func)
        if name in PLAIN_BUILTINS:
            return Kind.NONE
        if name in CONTAINER_BUILTINS and len(call.args) == 1 and not call.keywords:
            return self.kind(call.args[0], at, seen)
        if under_no_grad(self.ctx, call):
            return Kind.NONE
        if name and CREATION.match(name):
            return Kind.LEAF if _requires_grad_true(call) else Kind.NONE
        if name in PARAMETER:
            return Kind.LEAF
        if name in AUTOGRAD_GRAD:  # gradients carry a graph only when built with create_graph=True
            flag = next((k.value for k in call.keywords if k.arg == "create_graph"), None)
            if flag is None or isinstance(flag, ast.Constant) and not flag.value:
                return Kind.NONE
            return Kind.GRAPH if isinstance(flag, ast.Constant) else Kind.UNKNOWN
        if name in AUTOGRAD_BACKWARD:
            return Kind.NONE
        if isinstance(func, ast.Attribute) and func.attr == "requires_grad_":  # (``requires_grad_(False)``: frozen)
            flag = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "requires_grad"), None)
            return Kind.NONE if isinstance(flag, ast.Constant) and flag.value is False else Kind.LEAF
        args = _max(self.kind(a, at, seen) for a in [*call.args, *(k.value for k in call.keywords)])
        if name and constructs_torch_nn_class(name):  # a module (or PackedSequence) holds its arguments
            return args
        if name and name.startswith("torch."):  # the torch API, never a project function
            return _promote(args)
        local = self._local_function(func)
        if local is not None:  # a visible function is judged by what it returns, never by its name
            result = self._returns(local, seen)
            return self._bound_returns(local, call, at, seen) if result == Kind.UNKNOWN else result
        if self.is_module(func):
            return Kind.GRAPH
        receiver = self.kind(func.value, at, seen) if isinstance(func, ast.Attribute) else Kind.NONE
        if isinstance(func, ast.Attribute) and (dotted(func) is None or receiver >= Kind.LEAF):
            if func.attr not in TENSOR_METHODS and (dotted(func.value), id(at)) in self._duck_typed:
                return Kind.UNKNOWN  # crit.get_loss() of an object with a .backward() method
            # a tensor method: x.mean(), model(x).sum(), h.view(...)
            return _promote(_max([receiver, args]))
        if built_graph(self.ctx, call):  # graphfix run saw it build a graph
            return Kind.GRAPH
        return Kind.UNKNOWN  # a function we cannot see into (it may call .item())

    def _local_function(self, func: ast.expr) -> Optional[Scope]:
        return self.ctx.memo(("called_function", id(func)), lambda: called_function(self.ctx, self.scope, func))

    def _returned_element(self, expr: ast.Subscript, seen: set) -> Optional[Kind]:
        """``helper(...)[i]`` (or ``a, b = helper(...)``) where the local helper, or the forward of the
        module called, returns tuples."""
        call, index = expr.value, expr.slice
        if not (isinstance(call, ast.Call) and isinstance(index, ast.Constant) and isinstance(index.value, int)):
            return None
        scope = self._local_function(call.func)
        forward = self._forward(call.func) if scope is None else None
        scope = scope or forward
        if scope is None:
            return None
        values = [n.value for n in nodes_of(scope, RETURNS) if isinstance(n, ast.Return) and n.value is not None]
        if not values or not all(isinstance(v, ast.Tuple) and len(v.elts) > index.value for v in values):
            return None
        callee = facts(scope.ctx or self.ctx, scope)
        kind = _max(callee.kind(v.elts[index.value], v, seen) for v in values)
        if kind == Kind.UNKNOWN and forward is None:
            kind = self._bound_returns(scope, call, call, seen, index.value)
        return None if forward is not None and kind == Kind.UNKNOWN else kind  # unseen: a module output

    def _forward(self, func: ast.expr) -> Optional[Scope]:
        return forward_scope(self.ctx, func) if self.is_module(func) else None

    def _returns(self, scope: Scope, seen: set) -> Kind:
        """What a local function returns: the strongest kind among its ``return`` values."""
        key = ("returns", id(scope.node))
        if key in seen:
            return Kind.NONE  # a recursive call: the function's other returns decide
        seen.add(key)
        callee = facts(scope.ctx or self.ctx, scope)
        values = [n.value for n in nodes_of(scope, RETURNS) if isinstance(n, ast.Return) and n.value is not None]
        result = _max(callee.kind(v, v, seen) for v in values) if values else Kind.NONE
        seen.discard(key)  # a second call of the function in this question is no recursion
        return result

    def _bound_returns(self, scope: Scope, call: ast.Call, at: ast.AST, seen: set, index: Optional[int] = None) -> Kind:
        """What the function returns (element ``index`` of its tuples) given this call's arguments: a
        parameter the call gives a graph or a leaf that requires grad carries it (``loss_fn(model(x),
        y)``); the others stay unknown. Only GRAPH is concluded, never less than unknown."""
        key = ("bound_returns", id(scope.node))
        if key in seen:
            return Kind.UNKNOWN  # a recursive call: nothing is concluded from it
        seen.add(key)
        try:
            return self._bound_returns_once(scope, call, at, seen, index)
        finally:
            seen.discard(key)  # a second call of the function in this question is no recursion

    def _bound_returns_once(self, scope: Scope, call: ast.Call, at: ast.AST, seen: set, index: Optional[int]) -> Kind:
        arguments = bound_arguments(scope, call)
        bound = {p: k for p, arg in arguments if (k := self.kind(arg, at, seen)) >= Kind.LEAF}
        modules = frozenset(p for p, arg in arguments if module_argument(self.ctx, self.scope, arg, self.modules))
        own = scope.ctx or self.ctx
        key = ("bound_facts", id(scope.node), *sorted(bound.items()), *sorted(modules))
        callee = own.memo(key, lambda: GraphFacts(own, scope, bound, modules)) if bound or modules else None
        values = [n.value for n in nodes_of(scope, RETURNS) if isinstance(n, ast.Return) and n.value is not None] if callee else []
        values = [v if index is None else v.elts[index] for v in values]
        return Kind.GRAPH if any(callee.kind(v, v, seen) == Kind.GRAPH for v in values) else Kind.UNKNOWN

    def is_module(self, func: ast.expr) -> bool:
        """True if calling ``func`` runs an ``nn.Module`` forward pass: the program makes it one
        (module_values.holds_module); how it is spelled says nothing."""
        name = dotted(func)
        return name is not None and holds_module(self.ctx, self.scope, name, self.modules)

    def sometimes_detached(self, name: str, at: ast.AST) -> bool:
        """True if some assignment of ``name`` reaching ``at`` holds no graph (``x = x.detach()``
        on one path): the author manages the graph on purpose."""
        return any(value is not None and self.kind(value, stmt) == Kind.NONE for stmt, value in self.reaching(name, at))

    def carries_graph(self, expr: ast.expr, at: Optional[ast.AST] = None) -> bool:
        return self.kind(expr, at) == Kind.GRAPH


def _promote(kind: Kind) -> Kind:
    """An operation on a leaf that requires grad produces a graph."""
    return Kind.GRAPH if kind == Kind.LEAF else kind


def _requires_grad_true(call: ast.Call) -> bool:
    return any(k.arg == "requires_grad" and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords)


def facts(ctx: FileContext, scope: Scope) -> GraphFacts:
    return ctx.memo(("graph_facts", id(scope.node)), lambda: GraphFacts(ctx, scope))
