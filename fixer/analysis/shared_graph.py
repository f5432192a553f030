"""Which backward calls walk the same autograd graph.

A backward call frees the saved tensors of every node it walks. A later backward call fails
("Trying to backward through the graph a second time") when its graph shares a node that saved
tensors with the earlier one. Two targets share such a node when both derive, through the
scope's assignments, from one *evaluation* of a graph-carrying value: one module call output
(``logits, aux = model(x)``), a shared trunk (``h = trunk(x)``), or the same tensor. A loss
returned by a helper function (of the same file or an imported project module) is followed into
the helper's return expression.

``graph_origins`` answers with ``Origin``s: the assignments a target's graph certainly passes
through. Only certain facts count: a name with several reaching assignments (a branch, a value
carried around a loop) contributes nothing, so the answer errs towards "not shared".
"""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass, field
from typing import Optional

from fixer.analysis.calls import BackwardCall, backward_calls
from fixer.analysis.flow import ZERO_GRADIENT_METHODS, flowing_nodes, module_functions, named_function, own_return, reaching, root_names  # noqa: F401 (re-exported)
from fixer.analysis.graph import CREATION, DETACHING_METHODS, NON_SAVING, PARAMETER_CLASSES, GraphFacts, Kind, facts
from fixer.analysis.held_values import held_name
from fixer.analysis.module_outputs import outputs_share
from fixer.analysis.names import dotted, qualified
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.passes import is_pass_filter
from fixer.analysis.scopes import LOOPS, Scope, enclosing_block
from fixer.analysis.tensor_indexing import indexes_by_tensor
from fixer.context import FileContext
from fixer.nodes import walk

# Operations whose backward needs no saved tensor (shape bookkeeping, sums, copies).
SAVING_OPERATORS = (ast.Mult, ast.Div, ast.MatMult, ast.Pow, ast.FloorDiv, ast.Mod)
MAX_HELPER_DEPTH = 2


@dataclass(frozen=True)
class Origin:
    """One evaluation of a graph-carrying value that a target's graph passes through."""

    key: tuple  # identifies the evaluation: ids of the value node (and of the helper call leading to it)
    stmt: ast.AST  # the statement (of the scope asked about) that evaluates it
    saves: bool  # its own operations save tensors for backward (freed by the first backward)
    value: Optional[ast.AST] = field(default=None, compare=False, hash=False)  # the evaluated expression


def graph_origins(ctx: FileContext, scope: Scope, expr: ast.expr, at: ast.AST) -> frozenset[Origin]:
    """The origins ``expr`` (evaluated at ``at``) certainly derives from."""
    return _Tracer(ctx, scope).origins(expr, at, ())


def saves_tensors(ctx: FileContext, scope: Scope, expr: ast.expr) -> bool:
    """True if evaluating ``expr`` itself records an operation that saves tensors for backward: a
    module or criterion call, a torch function or tensor method outside NON_SAVING, ``*``, ``/``,
    ``@``, ``**``. Names are not followed (their own assignments are separate origins)."""
    return _Tracer(ctx, scope).saves(expr, 0)


class _Tracer:
    def __init__(self, ctx: FileContext, scope: Scope, depth: int = 0):
        self.ctx, self.scope, self.depth = ctx, scope, depth
        self.facts: GraphFacts = facts(ctx, scope)

    def origins(self, expr: ast.expr, at: ast.AST, prefix: tuple, _seen: Optional[set] = None) -> frozenset[Origin]:
        seen = _seen if _seen is not None else set()
        found: set[Origin] = set()
        skip: set[int] = set()
        for node in flowing_nodes(self.ctx, expr):
            if id(node) in skip:
                continue
            held = held_name(self.ctx, self.scope, node) if isinstance(node, ast.Subscript) else None
            if held is not None:  # outputs["real"] after outputs = {"real": real, ...}: only that element
                skip.add(id(node.value))
                node = held
            elif isinstance(node, ast.Subscript) and self._literal_holder(node.value, at):
                skip.add(id(node.value))  # an element of a literal that may have changed: unknown, not all of them
                continue
            if isinstance(node, ast.Call) and (helper := self.helper(node)) is not None:
                found |= self._through_helper(node, helper, at, prefix, seen)
                continue
            name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if name is None or (name, id(at)) in seen:
                continue
            seen.add((name, id(at)))
            defs = reaching(self.facts, name, at)
            if len(defs) != 1 or defs[0][1] is None:
                continue  # a branch, a loop-carried value or a loop variable: not certain
            stmt, bound = defs[0]
            if under_no_grad(self.ctx, stmt) or not self.carries(bound, stmt):
                continue  # recorded with grad off: a boundary, like .detach()
            value = _evaluated(stmt, bound)
            origin = self._origin(stmt, bound, value, prefix)
            if origin is not None:
                found.add(origin)
            found |= self.origins(value, stmt, prefix, seen)
        return frozenset(found)

    def _literal_holder(self, holder: ast.expr, at: ast.AST) -> bool:
        """``holder`` is bound here only to a dict, tuple or list literal (whose element a read
        names, when nothing may have changed it: held_name)."""
        name = dotted(holder)
        defs = reaching(self.facts, name, at) if name else []
        return len(defs) == 1 and isinstance(defs[0][1], (ast.Dict, ast.Tuple, ast.List))

    def carries(self, expr: ast.expr, at: ast.AST, _seen: Optional[set] = None) -> bool:
        """``expr`` carries a graph. GraphFacts.kind answers NONE for a method call on a name
        (``hidden.sum()``: it looks the receiver up twice with one seen-set), so names are
        followed here, each with a fresh question."""
        if self.facts.kind(expr, at) == Kind.GRAPH or self._helper_graph(_evaluated(at, expr)):
            return True
        seen = _seen if _seen is not None else set()
        for node in flowing_nodes(self.ctx, expr):
            if isinstance(node, ast.Call) and self._helper_graph(node):
                return True
            name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if name is None or (name, id(at)) in seen:
                continue
            seen.add((name, id(at)))
            if self.facts.kind(node, at) >= Kind.LEAF:
                return True
            defs = [(stmt, value) for stmt, value in reaching(self.facts, name, at) if not under_no_grad(self.ctx, stmt)]
            if any(value is not None and self.carries(value, stmt, seen) for stmt, value in defs):
                return True
        return False

    def _origin(self, stmt: ast.AST, bound: ast.expr, value: ast.expr, prefix: tuple) -> Optional[Origin]:
        """The evaluation ``stmt`` makes, when its parts provably share it: a module call only
        when its forward is known (one whole output, or outputs derived from one saving origin;
        else each element ``out[i]`` of ``a, b = model(x)`` is its own); a helper likewise."""
        if isinstance(value, ast.Call) and self.facts.is_module(value.func):
            share = outputs_share(self.ctx, value.func, _Tracer, self.depth, self.scope)
            if share is None:
                return None  # a forward we cannot read: unknown, not shared
            if not share:
                index = bound.slice.value if isinstance(bound, ast.Subscript) and bound.value is value and isinstance(bound.slice, ast.Constant) else None
                return None if index is None else Origin(prefix + (id(value), index), stmt, True, value)
        elif self._independent_elements(stmt, value):
            return None
        elif isinstance(value, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
            return None  # one evaluation per element, none shared by all (what they share is traced on)
        elif isinstance(value, ast.Call) and self.facts.kind(value, stmt) != Kind.GRAPH and not self._helper_graph(value):
            return None  # a function we cannot see into (``commons.slice_segments(y, ids)``) or whose
            # returns carry no graph: not a proven evaluation
        return Origin(prefix + (id(value),), stmt, self.saves(value, 0), value)

    # -- helper functions (this file or imported) --------------------------------------------------
    def helper(self, call: ast.Call) -> Optional[Scope]:
        """The function of this file or of an imported project module that ``call`` runs, when it
        is a plain function called by name."""
        return None if self.depth >= MAX_HELPER_DEPTH else named_function(self.ctx, call)

    def _returns(self, helper: Scope) -> tuple[set[str], bool, bool, bool]:
        return _returned_origins(helper.ctx or self.ctx, helper, self.depth + 1)

    def _helper_graph(self, value: ast.expr) -> bool:
        helper = self.helper(value) if isinstance(value, ast.Call) else None
        return helper is not None and self._returns(helper)[1]

    def _independent_elements(self, stmt: ast.AST, value: ast.expr) -> bool:
        """``a, b = helper(...)`` where the helper returns a tuple whose elements share no graph."""
        helper = self.helper(value) if isinstance(value, ast.Call) else None
        return (
            helper is not None and isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], (ast.Tuple, ast.List))
            and not self._returns(helper)[3]
        )

    def _through_helper(self, call: ast.Call, helper: Scope, at: ast.AST, prefix: tuple, seen: set) -> set[Origin]:
        """Origins of the arguments whose parameters the helper's return value derives from."""
        flowing = self._returns(helper)[0]
        params = [a.arg for a in helper.node.args.posonlyargs + helper.node.args.args]
        found: set[Origin] = set()
        for index, arg in enumerate(call.args):
            if index < len(params) and params[index] in flowing:
                found |= self.origins(arg, at, prefix, seen)
        for keyword in call.keywords:
            if keyword.arg in flowing:
                found |= self.origins(keyword.value, at, prefix, seen)
        return found

    # -- saved tensors --------------------------------------------------------------------------
    def saves(self, expr: ast.expr, level: int) -> bool:
        for node in flowing_nodes(self.ctx, expr, names=False):
            if isinstance(node, ast.BinOp) and isinstance(node.op, SAVING_OPERATORS):
                return True
            if isinstance(node, ast.Subscript) and self.carries(node.value, node) and indexes_by_tensor(self.ctx, self.facts, node):
                return True  # ``x[mask]``, ``x[idx]``: advanced indexing saves its index
            if not isinstance(node, ast.Call):
                continue
            if self.facts.is_module(node.func):
                return True
            helper = self.helper(node)
            if helper is not None:
                if self._returns(helper)[2]:
                    return True
                continue
            name = qualified(self.ctx, node.func) or ""
            if CREATION.match(name) or name in PARAMETER_CLASSES:
                continue  # a new tensor (a leaf, even with requires_grad=True; ``nn.Parameter(t)`` too)
            method = node.func.attr if isinstance(node.func, ast.Attribute) else name.rsplit(".", 1)[-1]
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None  # (a graph's, or a leaf's)
            torch_op = name.startswith("torch.") or receiver is not None and (self.carries(receiver, node) or self.facts.kind(receiver, node) == Kind.LEAF)
            if torch_op and method not in NON_SAVING and method not in DETACHING_METHODS:
                return True
        return False


def _evaluated(stmt: ast.AST, value: ast.expr) -> ast.expr:
    """The expression a statement evaluates once: ``model(x)`` for each name of ``a, b = model(x)``
    (GraphFacts binds them to ``model(x)[0]`` and ``model(x)[1]``)."""
    if isinstance(value, ast.Subscript) and isinstance(stmt, ast.Assign) and value.value is stmt.value:
        return value.value
    return value


def _returned_origins(ctx: FileContext, helper: Scope, depth: int) -> tuple[set[str], bool, bool, bool]:
    """(parameters the return values derive from, whether they carry a graph of their own,
    whether that graph saves tensors, whether the elements of a returned tuple share a saving
    origin) for a helper function."""

    def compute() -> tuple[set[str], bool, bool, bool]:
        tracer = _Tracer(ctx, helper, depth)
        params = {a.arg for a in helper.node.args.posonlyargs + helper.node.args.args + helper.node.args.kwonlyargs}
        flowing: set[str] = set()
        own_graph = saves = False
        elements_share = True
        for node in walk(helper.node):
            if not isinstance(node, ast.Return) or node.value is None or not own_return(ctx, node, helper):
                continue
            if under_no_grad(ctx, node):
                continue
            names = root_names(ctx, tracer.facts, node.value, node)
            flowing |= names & params
            origins = tracer.origins(node.value, node, ())
            kind = tracer.facts.kind(node.value, node)
            own_graph = own_graph or kind == Kind.GRAPH or bool(origins)
            saves = saves or tracer.saves(node.value, 0) or any(o.saves for o in origins)
            if isinstance(node.value, ast.Tuple):
                parts = [tracer.origins(e, node, ()) for e in node.value.elts]
                common = frozenset.intersection(*parts) if parts else frozenset()
                elements_share = elements_share and any(o.saves for o in common)
        return flowing, own_graph, saves, elements_share

    return ctx.memo(("shared_graph_returns", id(helper.node), depth), compute)


# -- backward calls that follow each other -------------------------------------------------------
def statement_path(ctx: FileContext, stmt: ast.AST, scope: Scope) -> list[ast.AST]:
    """``stmt`` and its ancestors up to (excluding) the scope node, innermost first."""
    path = [stmt]
    for parent in ctx.ancestors(stmt):
        if parent is scope.node:
            return path
        path.append(parent)
    return path


def runs_after_in_same_pass(ctx: FileContext, scope: Scope, first: ast.stmt, second: ast.stmt, allow_first_loop: bool = False) -> bool:
    """True if ``second`` runs after ``first`` in the same pass: later in source order, no loop
    or function between either statement and their common block, and not in exclusive branches
    (an ``if``'s body and its ``else``). With ``allow_first_loop``, ``first`` may sit in loops
    that end before ``second`` (the last iteration's value is the one seen after the loop)."""
    if (second.lineno, second.col_offset) <= (first.end_lineno, first.end_col_offset):
        return False
    first_path, second_path = statement_path(ctx, first, scope), statement_path(ctx, second, scope)
    second_ids = {id(n): i for i, n in enumerate(second_path)}
    in_first_loop = False  # a loop around ``first`` that ends before ``second``
    for index, node in enumerate(first_path):
        if id(node) in second_ids:
            return False  # one contains the other
        parent = ctx.parent(node)
        if parent is None or (id(parent) not in second_ids and parent is not scope.node):
            if isinstance(parent, LOOPS):
                if not allow_first_loop:
                    return False
                in_first_loop = True  # its continue/break end an iteration of that loop only
            if _jumps_after(ctx, node, None, in_first_loop):
                return False  # ``if warmup: ...; continue``: the pass ends before ``second``
            continue
        # ``parent`` is the common ancestor; ``node`` and second's child of it must share a list
        child = second_path[second_ids[id(parent)] - 1] if parent is not scope.node else second_path[-1]
        if any(isinstance(n, LOOPS) for n in second_path[: second_path.index(child) + 1]):
            return False
        return _same_field(parent, node, child) and not _jumps_after(ctx, node, child, in_first_loop)
    return False


def pass_loop(ctx: FileContext, stmt: ast.AST, scope: Scope) -> Optional[int]:
    """The innermost loop around ``stmt`` in ``scope`` (its id; None: none).
    ``runs_after_in_same_pass`` without ``allow_first_loop`` holds only between two statements of
    one such loop: no loop lies between either statement and their common block."""
    loop = next((p for p in statement_path(ctx, stmt, scope)[1:] if isinstance(p, LOOPS)), None)
    return None if loop is None else id(loop)


def same_pass_later(ctx: FileContext, scope: Scope, stmts: list[ast.AST], allow_first_loop: bool = False) -> list[list[int]]:
    """For each of ``stmts``, the later ones of the list (their indices) ``runs_after_in_same_pass``
    can hold for: those of its ``pass_loop``; with ``allow_first_loop``, of a loop around it or none."""
    groups: dict[Optional[int], list[int]] = {}
    for index, stmt in enumerate(stmts):
        groups.setdefault(pass_loop(ctx, stmt, scope), []).append(index)
    later = []
    for index, stmt in enumerate(stmts):
        around = [None, *(id(p) for p in statement_path(ctx, stmt, scope)[1:] if isinstance(p, LOOPS))]
        members = [groups.get(loop, []) for loop in (around if allow_first_loop else [pass_loop(ctx, stmt, scope)])]
        later.append(sorted(i for group in members for i in group[bisect.bisect_right(group, index) :]))
    return later


def _jumps_after(ctx: FileContext, node: ast.AST, until: Optional[ast.AST], in_first_loop: bool) -> bool:
    """A ``return``/``raise`` (or, outside a loop that ends before the second statement, a
    ``continue``/``break``) follows ``node`` in its block, before ``until`` when given."""
    jumps = (ast.Return, ast.Raise) if in_first_loop else (ast.Return, ast.Raise, ast.Continue, ast.Break)
    items = enclosing_block(ctx, node)
    if items is None:
        return False
    ids = [id(x) for x in items]
    later = items[ids.index(id(node)) + 1 : ids.index(id(until)) if until is not None and id(until) in ids else None]
    return any(isinstance(stmt, jumps) for stmt in later)


def _same_field(parent: ast.AST, a: ast.AST, b: ast.AST) -> bool:
    for name in ("body", "orelse", "finalbody", "handlers"):
        items = getattr(parent, name, None) or []
        ids = {id(x) for x in items}
        if id(a) in ids or id(b) in ids:
            return id(a) in ids and id(b) in ids
    return False


def same_value(ctx: FileContext, scope: Scope, first: BackwardCall, second: BackwardCall) -> bool:
    """Both calls backpropagate the same tensor: one name with the same single reaching assignment."""
    name = dotted(first.target)
    if name is None or name != dotted(second.target):
        return False
    graph = facts(ctx, scope)
    defs_first, defs_second = reaching(graph, name, first.node), reaching(graph, name, second.node)
    return len(defs_first) == 1 and len(defs_second) == 1 and defs_first[0][0] is defs_second[0][0] and defs_first[0][1] is not None


def shared_saving_origins(ctx: FileContext, scope: Scope, first: BackwardCall, second: BackwardCall) -> frozenset[Origin]:
    """Origins both targets derive from whose operations saved tensors."""
    one = graph_origins(ctx, scope, first.target, first.node)
    two = graph_origins(ctx, scope, second.target, second.node)
    return frozenset(o for o in one & two if o.saves)


def later_backward_through_same_graph(ctx: FileContext, scope: Scope, call: BackwardCall) -> Optional[BackwardCall]:
    """The next backward call of ``scope`` that runs after ``call`` in the same pass and walks a
    part of its graph that saved tensors (the same tensor, or a shared origin such as one module
    output). None when no such call is *proven*: None is not a proof that there is none."""
    stmt = ctx.statement_of(call.node)
    for later in backward_calls(ctx, scope):
        later_stmt = ctx.statement_of(later.node)
        if later is call or not runs_after_in_same_pass(ctx, scope, stmt, later_stmt, allow_first_loop=True):
            continue
        if same_value(ctx, scope, call, later) or shared_saving_origins(ctx, scope, call, later):
            return later
        if backwarded_again_after_loop(ctx, scope, call, later):
            return later
    return None


def backwarded_again_after_loop(ctx: FileContext, scope: Scope, first: BackwardCall, second: BackwardCall) -> bool:
    """``second`` follows the loop in which ``first`` backpropagates every iteration's fresh value
    of the same name, with no assignment between: it walks the last iteration's graph again."""
    name = dotted(first.target)
    if name is None or name != dotted(second.target):
        return False
    first_stmt, second_stmt = ctx.statement_of(first.node), ctx.statement_of(second.node)
    if runs_after_in_same_pass(ctx, scope, first_stmt, second_stmt):
        return False  # a plain repeat, not one after a loop
    if not runs_after_in_same_pass(ctx, scope, first_stmt, second_stmt, allow_first_loop=True):
        return False
    graph = facts(ctx, scope)
    at_first, at_second = reaching(graph, name, first.node), reaching(graph, name, second.node)
    if len(at_first) != 1 or at_first[0][1] is None or not at_second or at_second[0][0] is not at_first[0][0]:
        return False
    definition = at_first[0][0]
    unit, parent = first_stmt, ctx.parent(first_stmt)
    while ctx.parent(definition) is not parent and is_pass_filter(ctx, parent, unit):
        unit, parent = parent, ctx.parent(parent)  # ``if j % 1 == 0: loss.backward()``: every pass the value is built
    return ctx.parent(definition) is parent and _same_field(parent, definition, unit) and (
        isinstance(parent, LOOPS) or is_pass_filter(ctx, parent, unit))  # each (selected) pass
