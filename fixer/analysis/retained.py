"""Where a backward call's graph comes from, and whether anything can walk it again.

``GraphSources(ctx, scope).of(expr, at)`` follows ``expr`` back through the scope's assignments
(and container mutations such as ``losses.append(loss)``) to the statements that built the
graph-carrying values it is computed from. It is loop-aware: a value that reaches ``at`` from a
previous iteration (no assignment in the loop runs before ``at`` every time) is reached through a
*back edge* and makes the result ``carried``. What cannot be seen (a parameter, an attribute of
``self``, a graph-carrying global, the loop variable of an unknown iterable used directly as the
loss) makes the result ``unknown``. Calls are assumed to return fresh values built from their
arguments (of a project function, the paths of them its returns read: ``returned_reads``); an
``nn.Module`` attribute is a parameter (a leaf).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Optional

from fixer.analysis.flow import flowing_arguments
from fixer.analysis.graph import CREATION, GraphFacts, Kind, facts
from fixer.analysis.module_values import PARAMETER, holds_module, kept_on_module
from fixer.analysis.names import dotted, import_aliases, qualified
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.placed import NOWHERE, Placed, start
from fixer.analysis.plain_numbers import parameters, plain_attribute, plain_parameter
from fixer.analysis.call_sites import parameter_position
from fixer.analysis.callees import called_function
from fixer.analysis.class_model import construction_argument
from fixer.analysis.returned_reads import read_arguments
from fixer.analysis.retained_callers import callers_pass_data, callers_pass_graph
from fixer.analysis.training_regions import framework_training_step
from fixer.analysis.scopes import Scope, enclosing_loops, is_self_attribute, scope_nodes, scope_of, statement_index
from fixer.context import FileContext
from fixer.nodes import child_nodes, walk
from fixer.analysis.vocabulary import ADDS

DETACHING = frozenset(
    {"detach", "detach_", "item", "tolist", "numpy", "data_ptr", "size", "dim", "numel", "nelement", "element_size",
     "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite",
     "is_contiguous", "get_device", "stride", "storage_offset", "requires_grad_", "zero_"}
)
DETACHING_ATTRIBUTES = frozenset({"data", "grad", "shape", "dtype", "device", "requires_grad", "ndim", "is_leaf", "grad_fn"})
PLAIN_CALLS = frozenset(
    {"float", "int", "bool", "str", "len", "repr", "format", "print", "isinstance", "range", "hasattr", "id", "type", "callable"}
)
# methods that read a tensor held by ``self.x`` (otherwise ``self.x.f()`` is an object's method)
TENSOR_METHODS = frozenset(
    {"sum", "mean", "pow", "view", "reshape", "norm", "abs", "exp", "log", "sqrt", "squeeze", "unsqueeze", "flatten",
     "matmul", "mm", "bmm", "t", "transpose", "permute", "contiguous", "clone", "to", "cuda", "cpu", "float", "double",
     "half", "max", "min", "softmax", "log_softmax", "sigmoid", "tanh", "relu", "mul", "add", "sub", "div", "expand",
     "repeat", "gather", "index_select", "masked_fill", "clamp", "chunk", "split", "std", "var", "prod", "cumsum",
     "square", "neg", "dot", "type_as", "expand_as", "view_as", "reshape_as"}
)
MUTATORS = ADDS
TRANSPARENT = (ast.With, ast.AsyncWith)  # blocks that always run their body


@dataclass
class Sources:
    defs: dict[int, ast.AST] = field(default_factory=dict)  # graph-carrying defining statements
    back_defs: dict[int, ast.AST] = field(default_factory=dict)  # ... of those, reached from a previous iteration
    graph_defs: dict[int, ast.AST] = field(default_factory=dict)  # ... of those, certainly a graph (not UNKNOWN)
    unknown: bool = False
    carried: bool = False
    back_loops: set[int] = field(default_factory=set)  # ids of the loops whose back edges were taken

    def merge(self, other: "Sources") -> None:
        self.defs.update(other.defs)
        self.back_defs.update(other.back_defs)
        self.graph_defs.update(other.graph_defs)
        self.unknown |= other.unknown
        self.carried |= other.carried
        self.back_loops |= other.back_loops


@dataclass(frozen=True)
class Def:
    stmt: ast.AST
    value: Optional[ast.expr]
    mutation: bool = False


class GraphSources:
    """Sources of graph-carrying values, for one scope."""

    def __init__(self, ctx: FileContext, scope: Scope):
        self.ctx, self.scope = ctx, scope
        self.graph: GraphFacts = facts(ctx, scope)
        self.mutations = _mutations(scope)
        self.mutated = {name: Placed([stmt for stmt, _ in found]) for name, found in self.mutations.items()}
        self.aliases = import_aliases(ctx)

    # -- entry point -----------------------------------------------------------------------
    def of(self, expr: ast.expr, at: ast.AST) -> Sources:
        out = Sources()
        self._visit(expr, at, False, frozenset(), out, set(), frozenset())
        return out

    def of_anywhere(self, name: str) -> Sources:
        """Sources of every value ``name`` is ever given in this scope."""
        out, seen = Sources(), set()
        definitions = [Def(s, v) for s, v in self.graph.assignments.get(name, [])]
        for definition in definitions + [Def(s, v, True) for s, v in self.mutations.get(name, [])]:
            self._follow(name, definition, True, frozenset(), out, seen)
        return out

    # -- expressions -----------------------------------------------------------------------
    def _visit(self, expr, at, through_call: bool, back: frozenset, out: Sources, seen: set, bound: frozenset) -> None:
        if expr is None or isinstance(expr, (ast.Constant, ast.JoinedStr, ast.Compare, ast.Lambda)):
            return
        if isinstance(expr, (ast.Name, ast.Attribute)):
            self._name(expr, at, through_call, back, out, seen, bound)
        elif isinstance(expr, ast.Call):
            self._call(expr, at, through_call, back, out, seen, bound)
        elif isinstance(expr, ast.Subscript):
            self._visit(expr.value, at, through_call, back, out, seen, bound)
        elif isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
            return
        elif isinstance(expr, ast.IfExp):
            for part in (expr.body, expr.orelse):
                self._visit(part, at, through_call, back, out, seen, bound)
        elif isinstance(expr, ast.Dict):
            for value in expr.values:
                self._visit(value, at, through_call, back, out, seen, bound)
        elif isinstance(expr, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = bound | {n.id for g in expr.generators for n in walk(g.target) if isinstance(n, ast.Name)}
            for generator in expr.generators:
                self._visit(generator.iter, at, True, back, out, seen, bound)
            elements = [expr.key, expr.value] if isinstance(expr, ast.DictComp) else [expr.elt]
            for element in elements:
                self._visit(element, at, through_call, back, out, seen, inner)
        else:
            for child in child_nodes(expr):
                if isinstance(child, ast.expr):
                    self._visit(child, at, through_call, back, out, seen, bound)

    def _call(self, call: ast.Call, at, through_call, back, out, seen, bound) -> None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in DETACHING:
            return
        name = qualified(self.ctx, func) or ""
        if name in PLAIN_CALLS or CREATION.match(name) or name in PARAMETER:
            return
        read = read_arguments(self.ctx, call)  # a project function's summary: the paths of its arguments it reads
        for arg, method in read if read is not None else [(a, None) for a in flowing_arguments(self.ctx, call)]:
            if method is None or self._is_value(arg, method):  # (``self.model(x)`` in the helper reads no value)
                self._visit(arg.value if isinstance(arg, ast.keyword) else arg, at, True, back, out, seen, bound)
        if self._reads_tensor_of_module(call):
            out.unknown = True  # compute_loss(loss, model) returning loss + model.reg_loss
        if isinstance(func, ast.Attribute) and self._is_value(func.value, func.attr):
            self._visit(func.value, at, through_call, back, out, seen, bound)

    def _reads_tensor_of_module(self, call: ast.Call) -> bool:
        """A project function the call runs reads an attribute of a module it is given where the
        program keeps a tensor (``model.reg_loss``, module_values.kept_on_module), as if read here."""
        given = [i for i, a in enumerate(call.args) if isinstance(a, (ast.Name, ast.Attribute)) and dotted(a) and self._is_module_path(dotted(a))]
        if not given:
            return False
        callee = called_function(self.ctx, self.scope, call.func)
        if callee is None or isinstance(callee.node, ast.Module):
            return False
        params = [a.arg for a in callee.node.args.posonlyargs + callee.node.args.args][1 if callee.self_name else 0 :]
        names = {params[i] for i in given if i < len(params)}
        return any(
            isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in names and isinstance(n.ctx, ast.Load)
            and (kept_on_module(self.ctx, n.attr) or kept_on_module(callee.ctx or self.ctx, n.attr))
            for n in scope_nodes(callee)
        )

    def _is_value(self, receiver: ast.expr, method: str) -> bool:
        """In ``receiver.method(...)``, is ``receiver`` a tensor (not an object offering a method)?"""
        name = dotted(receiver)
        if name is None:
            return True  # model(x).sum(), outputs[0].mean()
        root = name.split(".")[0]
        if root in self.aliases or self._is_module_path(name) or root in _definitions(self.ctx):
            return False
        if root == self.scope.self_name:
            return "." in name and method in TENSOR_METHODS
        return True

    def _is_module_path(self, name: str) -> bool:
        """``model``, ``self.encoder.weight``: a module or something it holds (a parameter)."""
        parts = name.split(".")
        return any(holds_module(self.ctx, self.scope, ".".join(parts[:i]), self.graph.modules) for i in range(1, len(parts) + 1))

    # -- names -----------------------------------------------------------------------------
    def _name(self, expr, at, through_call, back, out, seen, bound) -> None:
        if isinstance(expr, ast.Attribute) and expr.attr in DETACHING_ATTRIBUTES and not is_self_attribute(self.ctx, expr):
            return
        name = dotted(expr)
        if name is None:
            self._visit(expr.value, at, through_call, back, out, seen, bound)
            return
        if name in bound or name.split(".")[0] in self.aliases:
            return
        if self._is_module_path(name):
            prefix, _, attribute = name.rpartition(".")
            if prefix and kept_on_module(self.ctx, attribute) and self._is_module_path(prefix):
                out.unknown = True  # model.reg_loss: a tensor kept on a module, built who knows when
            return
        defs = self._reaching(name, at)
        if not defs:
            self._unseen(name, expr, at, through_call, back, out, seen, bound)
        for definition, via_back_edge in defs:
            self._follow(name, definition, through_call, back | via_back_edge, out, seen)

    def _unseen(self, name: str, expr, at, through_call, back, out, seen, bound) -> None:
        """A name with no assignment reaching ``at`` in this scope."""
        root = name.split(".")[0]
        if "." in name:
            if root == self.scope.self_name and name.count(".") == 1 and (plain_attribute(self.ctx, self.scope, name) or self._given_data(name)):
                return  # self.gamma: a number set in the class; self.data: given data at construction
            if root == self.scope.self_name or root in parameters(self.scope) or root not in self.graph.assignments:
                out.unknown = True  # self.cache, obj.hidden: set somewhere we cannot see
            else:
                self._visit(expr.value, at, through_call, back, out, seen, bound)
        elif name in parameters(self.scope):
            if callers_pass_graph(self.ctx, self.scope, name) or not (
                plain_parameter(self.scope, name) or callers_pass_data(self.ctx, self.scope, name)
                or framework_training_step(self.scope) and parameter_position(self.scope, name) in (0, 1)
            ):  # (the batch and its index a LightningModule's training_step gets from the data loader)
                out.unknown = True  # the caller's graph: it may backpropagate through it again
        elif not isinstance(self.scope.node, ast.Module) and _global_carries_graph(self.ctx, name):
            out.unknown = True

    def _given_data(self, name: str) -> bool:
        """``self.attr`` holds for life what the file's one construction of the class passes for
        it, and that carries no graph (``Trainer(model, data)`` with ``data`` a list of tensors)."""
        cls = self.scope.class_node
        given = construction_argument(self.ctx, cls, name.split(".")[1]) if cls is not None else None
        return given is not None and facts(self.ctx, scope_of(self.ctx, given)).kind(given, given) == Kind.NONE

    def _follow(self, name: str, definition: Def, through_call, back, out: Sources, seen: set) -> None:
        stmt, value = definition.stmt, definition.value
        key = (name, id(stmt), back)
        if key in seen:
            return
        seen.add(key)
        if under_no_grad(self.ctx, stmt):
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            self._loop_variable(stmt, through_call, back, out, seen)
            return
        if isinstance(stmt, ast.withitem):
            return
        kind = self.graph.kind(value, stmt) if value is not None else Kind.NONE
        if isinstance(value, (ast.Dict, ast.DictComp)) or definition.mutation:
            kind = max(kind, Kind.UNKNOWN)
        elif kind == Kind.UNKNOWN and _unpacks_names(value):
            inner = Sources()  # ``z, real = batch``: as much a graph as the names it unpacks
            self._visit(value, stmt, through_call, back, inner, seen, frozenset())
            if not inner.defs and not inner.unknown:
                return
            out.merge(inner)
        if kind in (Kind.GRAPH, Kind.UNKNOWN):
            out.defs[id(stmt)] = stmt
            if kind == Kind.GRAPH:
                out.graph_defs[id(stmt)] = stmt
            if back:
                out.back_defs[id(stmt)] = stmt
                out.carried = True
                out.back_loops |= back
        self._visit(value, stmt, through_call, back, out, seen, frozenset())
        if isinstance(stmt, ast.AugAssign) and not definition.mutation:
            for previous, via_back_edge in self._reaching(name, stmt):
                self._follow(name, previous, through_call, back | via_back_edge, out, seen)

    def _loop_variable(self, loop: ast.AST, through_call, back, out: Sources, seen: set) -> None:
        """``for x in it``: elements of a container of graphs carry graphs; elements of a local
        data container are data; those of an iterable we cannot see are unknown."""
        inner = Sources()
        self._visit(loop.iter, loop, True, back, inner, seen, frozenset())
        if inner.graph_defs:
            out.merge(inner)
        elif inner.unknown:
            out.unknown = True

    # -- reaching definitions ----------------------------------------------------------------
    def _reaching(self, name: str, at: ast.AST) -> list[tuple[Def, frozenset]]:
        """Definitions of ``name`` that may reach ``at``, each with the loop (its id, in a set; empty
        for none) from whose previous iteration it comes. Container mutations never kill earlier contents."""
        assigned, mutated = self.graph.assignments.get(name, []), self.mutations.get(name, [])
        placed, changed = self.graph.placed(name), self.mutated.get(name, NOWHERE)  # by position: a long scope is not scanned
        loops = enclosing_loops(self.ctx, at, self.scope)  # a header (``for x in ...`` around ``at``), or straight before it:
        chosen = {i for s, _ in self.graph.reaching(name, at) for i in placed.of(s)} | {i for loop in loops for i in placed.of(loop)}
        found = [(Def(*assigned[i]), frozenset()) for i in sorted(chosen) if any(assigned[i][0] is loop for loop in loops) or _before(assigned[i][0], at)]
        found += [(Def(*mutated[i], True), frozenset()) for i in changed.starting_before(start(at), True) if _before(mutated[i][0], at)]
        for loop in loops:
            inside = [Def(*assigned[i]) for i in placed.starting_within(loop) if _within(self.ctx, assigned[i][0], loop)]
            inside += [Def(*mutated[i], True) for i in changed.starting_within(loop) if _within(self.ctx, mutated[i][0], loop)]
            if any(not d.mutation and self._dominates(d.stmt, at, loop) for d in inside):
                break
            found += [(d, frozenset({id(loop)})) for d in inside]
        return found

    def _dominates(self, stmt: ast.AST, at: ast.AST, loop: ast.AST) -> bool:
        """``stmt`` runs before ``at`` in every iteration of ``loop``."""
        if stmt is loop:
            return True  # the loop's own variable
        if not _before(stmt, at):
            return False
        at_ancestors = {id(a) for a in self.ctx.ancestors(at)}
        for parent in self.ctx.ancestors(stmt):
            if parent is loop:
                return True
            if id(parent) not in at_ancestors and not isinstance(parent, TRANSPARENT):
                return False  # inside an if/try/inner loop that ``at`` is not in
        return False


# -- helpers -----------------------------------------------------------------------------------
def _before(stmt: ast.AST, at: ast.AST) -> bool:
    """``stmt`` finishes before ``at`` starts (and does not contain it)."""
    end = (getattr(stmt, "end_lineno", stmt.lineno), getattr(stmt, "end_col_offset", 0))
    return end < start(at) or end == start(at) and not any(n is at for n in walk(stmt))  # spans nest: walk only on a tie


def _within(ctx: FileContext, node: ast.AST, container: ast.AST) -> bool:
    return node is container or any(parent is container for parent in ctx.ancestors(node))


def _mutations(scope: Scope) -> dict[str, list[tuple[ast.stmt, Optional[ast.expr]]]]:
    """``name.append(v)``, ``name[k] = v`` and the like, per container name."""
    found: dict[str, list] = {}
    for node in scope_nodes(scope):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Attribute) and call.func.attr in MUTATORS:
                name = dotted(_container(call.func.value))
                if name:
                    value = ast.Tuple(elts=[*call.args, *(k.value for k in call.keywords)], ctx=ast.Load())
                    found.setdefault(name, []).append((node, value))
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and (name := dotted(_container(target))):
                    found.setdefault(name, []).append((node, node.value))
    return found


def _unpacks_names(value: Optional[ast.expr]) -> bool:
    """A plain name, or subscripts, slices and tuples of names (``batch``, ``batch[0]``,
    ``seq[:, 1:]``, ``(x, y)``)."""
    if isinstance(value, ast.Name):
        return True
    if isinstance(value, ast.Subscript):
        return _unpacks_names(value.value) and _constant_index(value.slice)
    return isinstance(value, (ast.Tuple, ast.List)) and bool(value.elts) and all(_unpacks_names(e) for e in value.elts)


def _constant_index(index: Optional[ast.expr]) -> bool:
    """``0``, ``-1``, ``1:``, ``:, :-1``: an index or slice made of constants only."""
    if index is None or isinstance(index, ast.Constant):
        return True
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        return isinstance(index.operand, ast.Constant)
    if isinstance(index, ast.Slice):
        return all(_constant_index(part) for part in (index.lower, index.upper, index.step))
    return isinstance(index, ast.Tuple) and all(_constant_index(e) for e in index.elts)


def _container(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Subscript):
        node = node.value
    return node


def _definitions(ctx: FileContext) -> set[str]:
    """Module-level function and class names."""

    def compute() -> set[str]:
        return {n.name for n in ctx.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}

    return ctx.memo("retained_definitions", compute)


def _global_carries_graph(ctx: FileContext, name: str) -> bool:
    """A module-level name assigned something that may carry a graph."""
    module = statement_index(ctx).scopes[0]
    graph = facts(ctx, module)
    return any(value is None or graph.kind(value, stmt) in (Kind.GRAPH, Kind.UNKNOWN) for stmt, value in graph.assignments.get(name, []))


def sources(ctx: FileContext, scope: Scope) -> GraphSources:
    return ctx.memo(("graph_sources", id(scope.node)), lambda: GraphSources(ctx, scope))
