"""Graph-carrying tensors an ``nn.Module`` keeps on ``self`` from one forward call to the next.

A *forward path* is a module class's ``forward`` plus the methods it calls on ``self``. A cached
state is an attribute the path stores a graph-carrying value into (``self.prev = out``,
``self.running = self.running * m + h.mean(0)``) and reads, in a later call, before storing it
again: the read sees the previous call's tensor, whose graph that call's backward freed (when it
feeds the output) or which chains every call's graph onto the next (a running statistic that only
feeds itself). Values stored under ``no_grad`` or detached, attributes detached anywhere in the
class, caches only read after being set in the same call, and state that another method resets
(an author managing the state's lifetime, as spiking neurons do between sequences, or a
forward-path ``init_state`` storing zeros before ``forward`` unrolls a sequence) are left alone,
unless every call of that reset is in training code outside the loop around its backward calls
(``reset_calls``: a memory reset per document, backpropagated per segment)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

from fixer.analysis.carried_flow import Feeding, contains, dominates, names_in, position, surely_defines
from fixer.analysis.bindings import module_classes
from fixer.analysis.call_sites import field_instance, given_instance
from fixer.analysis.flag_resets import SETUP, reset_may_run_between_backwards, reset_through_flag
from fixer.analysis.graph import Kind, facts
from fixer.analysis.importers import class_importers, project_constructions
from fixer.analysis.names import dotted, last_name, qualified
from fixer.analysis.no_grad import eval_only
from fixer.analysis.project_callers import project_life_field
from fixer.analysis.scopes import LOOPS, RETURNS, Scope, nodes_of, scope_nodes, scope_of, scopes, statement_index
from fixer.context import FileContext
from fixer.nodes import child_nodes, walk

CUTS = ("detach", "repackage", "reset", "clear")


@dataclass(frozen=True)
class CachedState:
    method: Scope  # the forward-path method that stores and reads the attribute
    attr: str  # "prev" for self.prev
    store: ast.Assign
    read: ast.expr  # a read that sees the previous call's value
    statistic: bool  # the value only feeds its own update: no gradient ever flows through it
    read_elsewhere: bool  # another method reads it too (it may hand the tensor to a loss)
    read_after_store: bool  # read again in the same call after the store
    previous_reads: tuple[ast.expr, ...] = ()  # reads seeing the previous call's value that feed a value
    methods: tuple[Scope, ...] = ()  # every method of the class
    stores: tuple[tuple[ast.Assign, ast.expr], ...] = ()  # every graph store of the attribute in the method: (statement, value)


SELF_CALL = re.compile(rb"\bself\.(\w+)\(")
_ITEM = rb"\(?\*?[\w.]+(?:\[[^\]\n]*\])?\)?"  # one assignment target: name, attribute, subscript
SELF_STORE = re.compile(
    rb"^[ \t]+(?:%s\s*,\s*)*\(?self\.\w+(?:\[[^\]\n]*\])?\)?(?:\s*,\s*%s)*\s*[-+*/@]?=(?!=)" % (_ITEM, _ITEM), re.M
)


def may_cache_on_module(data: bytes) -> bool:
    """Byte-level pre-filter: a ``def forward`` whose body (or a ``self.`` method it calls) assigns
    to ``self.<attr>``. Most model files only assign attributes in ``__init__`` and are skipped."""
    if b"def forward" not in data:
        return False
    if b"\r" in data:  # the patterns below read lines the \n way; CR-only and CRLF files too
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    for forward in _definitions(data, b"forward"):
        body = _block(data, *forward)
        if SELF_STORE.search(body):
            return True
        for name in set(SELF_CALL.findall(body)):
            if any(SELF_STORE.search(_block(data, *helper)) for helper in _definitions(data, name)):
                return True
    return False


def _definitions(data: bytes, name: bytes) -> Iterator[tuple[int, int]]:
    """(indent, end) of each line ``def name`` (the whole word, after spaces or tabs only), found
    by ``bytes.find``: a pattern anchored at line starts would be tried at every byte."""
    needle = b"def " + name
    at = data.find(needle)
    while at >= 0:
        end, line = at + len(needle), data.rfind(b"\n", 0, at) + 1
        after = data[end : end + 1]
        if not data[line:at].strip(b" \t") and not (after.isalnum() or after == b"_"):
            yield at - line, end
        at = data.find(needle, end)


@lru_cache(maxsize=None)
def _dedent(indent: int) -> re.Pattern[bytes]:
    return re.compile(rb"^[ \t]{0,%d}(?=\S)" % indent, re.M)


def _block(data: bytes, indent: int, end: int) -> bytes:
    """The lines of a ``def`` indented ``indent`` whose name ends at ``end`` (up to the next line
    indented no deeper than it)."""
    start = data.find(b"\n", end)
    if start < 0:
        return b""
    after = _dedent(indent).search(data, start + 1)
    return data[start : after.start() if after else len(data)]


def cached_states(ctx: FileContext) -> list[CachedState]:
    return ctx.memo("cached_states", lambda: list(_find(ctx)))


def class_methods_of_modules(ctx: FileContext) -> list[list[Scope]]:
    """The methods (with a ``self``) of each ``nn.Module`` class of the file."""
    classes = module_classes(ctx)
    by_class: dict[int, list[Scope]] = {}
    for scope in scopes(ctx):
        if scope.class_node is not None and scope.class_node.name in classes and scope.self_name:
            by_class.setdefault(id(scope.class_node), []).append(scope)
    return list(by_class.values())


def _find(ctx: FileContext) -> Iterator[CachedState]:
    for methods in class_methods_of_modules(ctx):
        path = forward_path(methods)
        for method in path:
            yield from _states_of(ctx, method, methods, path)


def forward_path(methods: list[Scope]) -> list[Scope]:
    by_name = {m.node.name: m for m in methods}
    path = [by_name["forward"]] if "forward" in by_name else []
    for method in path:
        for node in scope_nodes(method):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and dotted(node.func.value) == method.self_name:
                callee = by_name.get(node.func.attr)
                if callee is not None and callee not in path:
                    path.append(callee)
    return path


def _states_of(ctx: FileContext, method: Scope, methods: list[Scope], path: list[Scope]) -> Iterator[CachedState]:
    graph = facts(ctx, method)
    prefix = f"{method.self_name}."
    for name, defs in graph.assignments.items():
        if not name.startswith(prefix) or name.count(".") != 1:
            continue
        attr = name[len(prefix) :]
        stores = [(s, v) for s, v in defs if isinstance(s, ast.Assign) and v is not None and stores_graph(ctx, method, methods, v, s)]
        stores = [(s, v) for s, v in stores if not eval_only(ctx, s, method)]
        if not stores or managed(ctx, method, methods, path, attr):
            continue
        reads = [r for r in _previous_call_reads(ctx, method, name, defs) if not eval_only(ctx, r, method)]
        outputs = [Feeding(ctx, method.body, ret.value, ret) for ret in returned_values(method)]
        updates = [Feeding(ctx, method.body, v, s) for s, v in stores]
        to_output = next((r for r in reads if any(f.reaches(r) for f in outputs)), None)
        to_itself = next((r for r in reads if any(f.reaches(r) for f in updates)), None)
        read = to_output or to_itself
        if read is None:
            continue
        store = stores[0][0]
        later = [r for r in attribute_reads(method, name) if position(r) > position(store) and not contains(store, r) and not _exclusive(ctx, store, r)]
        elsewhere = any(attribute_reads(m, f"{m.self_name}.{attr}") for m in methods if m is not method)
        feeding = tuple(r for r in reads if any(f.reaches(r) for f in outputs + updates))
        yield CachedState(method, attr, store, read, to_output is None and not elsewhere, elsewhere, bool(later), feeding, tuple(methods), tuple(stores))


def _exclusive(ctx: FileContext, store: ast.AST, read: ast.AST) -> bool:
    """``store`` and ``read`` lie in the two branches of one ``if``, in no loop around both."""
    for parent in ctx.ancestors(store):
        if isinstance(parent, LOOPS) and contains(parent, read):
            return False
        if isinstance(parent, ast.If) and contains(parent, read):
            in_body = any(contains(s, store) for s in parent.body)
            return in_body != any(contains(s, read) for s in parent.body)
    return False


def attribute_reads(method: Scope, name: str) -> list[ast.expr]:
    return [
        n
        for n in scope_nodes(method)
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load) and dotted(n) == name
    ]


def _previous_call_reads(ctx: FileContext, method: Scope, name: str, defs) -> list[ast.expr]:
    """Reads of ``self.attr`` that no assignment of this call surely precedes: they see the
    previous call's value."""
    candidates = {id(a): a for s, _ in defs for a in [s, *ctx.ancestors(s)] if isinstance(a, ast.stmt) and a is not method.node}
    return [
        read
        for read in sorted(attribute_reads(method, name), key=position)
        if not any(dominates(ctx, c, read) and surely_defines(c, name) for c in candidates.values())
    ]


def returned_values(method: Scope) -> list[ast.Return]:
    return [n for n in nodes_of(method, RETURNS) if isinstance(n, ast.Return) and n.value is not None]


def managed(ctx: FileContext, method: Scope, methods: list[Scope], path: list[Scope], attr: str) -> bool:
    """Another method (not construction) assigns the attribute, any method detaches/resets it, or
    code outside the class assigns it on an instance (``model.hidden = model.init_hidden()`` in the
    training loop, also in a file that imports the class). On the forward path, another method's
    graph-free store is a reset at each sequence start (``forward`` calling ``init_state`` before
    unrolling ``step``) unless a test of the attribute itself guards it (``if self.h is None:``, a
    lazy initialisation that runs once)."""
    if _assigned_on_objects(ctx, attr, skip=frozenset(id(m.node) for m in methods)):
        return True  # another object's attribute of that name: an instance of this class
    if method.class_node is not None and any(_assigned_on_objects(other, attr) for other in class_importers(ctx, method.class_node)):
        return True  # the training loop of a file that imports the class resets it
    if reset_through_flag(ctx, method, methods, path, attr):
        return True  # refilled under a flag that a reset sets at each step (``if self.should_reset:``)
    for other in methods:
        name = f"{other.self_name}.{attr}"
        if other.node.name not in SETUP and name in facts(ctx, other).assignments:
            if other not in path and not (_resets(ctx, other, methods, name) and not reset_may_run_between_backwards(ctx, other)):
                return True  # (a reset that the training loop runs outside its backward loop manages nothing)
            if other in path and other is not method and _resets(ctx, other, methods, name):
                return True
        for node in scope_nodes(other):
            if isinstance(node, ast.Call) and any(cut in (last_name(node.func) or "").lower() for cut in CUTS):
                if name in names_in(ctx.statement_of(node)):
                    return True
    return False


def _assigned_on_objects(ctx: FileContext, attr: str, skip: frozenset[int] = frozenset()) -> bool:
    """Code of the file (outside the functions whose node ids are in ``skip``) stores
    ``<object>.attr`` on an object other than its own ``self`` (``model.hidden = None``)."""
    for stmt in statement_index(ctx).assigns:
        for target in stmt.targets:
            for node in walk(target):
                if isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.ctx, ast.Store):
                    scope = scope_of(ctx, stmt)
                    if id(scope.node) not in skip and dotted(node.value) != scope.self_name:
                        return True
    return False


def _resets(ctx: FileContext, method: Scope, methods: list[Scope], name: str) -> bool:
    """``method`` stores a value known to carry no graph into ``name``, and neither the store nor
    every call of ``method`` is guarded by a test of the attribute itself."""
    graph = facts(ctx, method)
    attr = name.split(".", 1)[1]
    for stmt, value in graph.assignments[name]:
        if not isinstance(stmt, ast.Assign) or value is None or stores_graph(ctx, method, methods, value, stmt):
            continue
        if _guarded_by(ctx, stmt, method, attr):
            continue
        calls = [
            (caller, n)
            for caller in methods
            for n in scope_nodes(caller)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == method.node.name
            and dotted(n.func.value) == caller.self_name
        ]
        if not calls or not all(_guarded_by(ctx, call, caller, attr) for caller, call in calls):
            return True
    return False


def _guarded_by(ctx: FileContext, node: ast.AST, method: Scope, attr: str) -> bool:
    """An ``if`` around ``node`` within ``method`` tests ``self.<attr>``, or another attribute its
    body initialises together with it (``if self.memory is None: self.memory = ...; self.boxes = ...``)."""
    for parent in ctx.ancestors(node):
        if parent is method.node:
            return False
        if isinstance(parent, (ast.If, ast.While)):
            tested = names_in(parent.test)
            stored = {dotted(t) for s in parent.body if isinstance(s, ast.Assign) for t in s.targets}
            if f"{method.self_name}.{attr}" in tested or tested & stored - {None}:
                return True
    return False


SAFE_METHODS = frozenset({"item", "tolist", "numpy", "detach", "detach_", "cpu", "data"})


def stores_graph(ctx: FileContext, method: Scope, methods: list[Scope], value: ast.expr, stmt: ast.AST) -> bool:
    """The stored value carries a graph: by the graph analysis, or because it is computed with
    torch operations from a parameter of the method that every call in this file passes a
    graph-carrying value (``self._update_memory(self.k(x), v)``, ``lif(fc(x))``)."""
    graph = facts(ctx, method)
    kind = graph.kind(value, stmt)
    if kind == Kind.GRAPH:
        return True
    if kind != Kind.UNKNOWN:
        return False
    live, sources, pending = set(), [], [value]
    while pending:
        expr = pending.pop()
        sources.append(expr)
        for name in _data_names(expr) - live:
            live.add(name)
            pending += [v for s, v in graph.assignments.get(name, []) if v is not None and isinstance(s, ast.Assign)]
    helpers = {m.node.name for m in methods}
    for source in sources:
        for node in walk(source):
            if isinstance(node, ast.Call) and not _tensor_op(ctx, node, method.self_name, helpers):
                return False
    params = [a.arg for a in method.node.args.posonlyargs + method.node.args.args][1:]
    return any(name in live and _graph_argument(ctx, method, methods, i, name) for i, name in enumerate(params))


METADATA = frozenset({"size", "shape", "dtype", "device", "dim", "ndim", "numel", "is_cuda", "requires_grad", "layout"})
LIKE = frozenset({"type_as", "to", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "expand_as", "view_as", "reshape_as"})


def _data_names(expr: ast.expr) -> set[str]:
    """Names whose values flow into ``expr`` as data: not through metadata (``x.size(1)``,
    ``x.device``) nor as the template of ``t.type_as(x)`` / ``t.to(x.dtype)``."""
    parents = {id(child): node for node in walk(expr) for child in child_nodes(node)}
    found = set()
    for node in walk(expr):
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
            continue
        parent = parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.attr in METADATA:
            continue
        if isinstance(parent, ast.Call) and node is not parent.func and isinstance(parent.func, ast.Attribute) and parent.func.attr in LIKE:
            continue
        if isinstance(parent, ast.keyword) and parent.arg in ("device", "dtype"):
            continue
        found.add(node.id)
    return found


def _tensor_op(ctx: FileContext, call: ast.Call, self_name: str, helpers: set[str]) -> bool:
    """A torch function, a tensor method or a submodule call: none of them drops the graph (a
    helper method of the class might: unknown)."""
    name = qualified(ctx, call.func) or ""
    if name.startswith("torch."):
        return True
    if isinstance(call.func, ast.Attribute):
        if dotted(call.func.value) == self_name and call.func.attr in helpers:
            return False
        return call.func.attr not in SAFE_METHODS
    return False


def _held_instance_call(ctx: FileContext, scope: Scope, call: ast.Call, cls: ast.ClassDef) -> bool:
    """``self.lif(x)`` in a method whose object holds an instance of ``cls`` in that field (given
    at the class's one construction in the project: ``project_life_field``)."""
    func = call.func
    if not (scope.self_name and isinstance(func, ast.Attribute) and dotted(func.value) == scope.self_name):
        return False
    return field_instance(ctx, scope, func, cls) or (given := project_life_field(ctx, scope, func)) is not None and given_instance(*given, ctx, cls)


def _graph_argument(ctx: FileContext, method: Scope, methods: list[Scope], index: int, name: str) -> bool:
    """Every call of ``method`` found in this file (for ``forward``, also through the instances
    the files importing the class construct) passes a graph-carrying value at ``index``."""
    calls = []
    if method.node.name == "forward":
        instances = {
            dotted(t)
            for a in statement_index(ctx).assigns
            if isinstance(a.value, ast.Call) and dotted(a.value.func) == method.class_node.name
            for t in a.targets
        }
        for scope in scopes(ctx):
            calls += [(ctx, scope, n) for n in scope_nodes(scope) if isinstance(n, ast.Call) and (
                dotted(n.func) in instances or _held_instance_call(ctx, scope, n, method.class_node))]
        for own, _, construction in project_constructions(ctx, method.class_node) or []:
            if own is not ctx:
                instance = own.parent(construction).targets[0].id
                for scope in scopes(own):
                    calls += [(own, scope, n) for n in scope_nodes(scope) if isinstance(n, ast.Call) and dotted(n.func) == instance]
    else:
        for caller in methods:
            calls += [
                (ctx, caller, n)
                for n in scope_nodes(caller)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == method.node.name
                and dotted(n.func.value) == caller.self_name
            ]
    if not calls:
        return False
    for own, scope, call in calls:
        args = {k.arg: k.value for k in call.keywords}
        arg = call.args[index] if index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args) else args.get(name)
        if arg is None or facts(own, scope).kind(arg, own.statement_of(call)) != Kind.GRAPH:
            return False
    return True
