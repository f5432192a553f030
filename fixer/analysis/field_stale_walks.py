"""GF108 across the methods of a training class: a forward pass stored in fields by one method
(``forward()``: ``self.fake = self.netG(self.real)``, ``self.code = self.netE(self.fake)``), an
optimizer step in another (``update()``: ``self.opt_E.step()``), and a backward in a third
(``backward_latent()``: ``self.loss = (self.code - self.z).abs().mean(); self.loss.backward()``),
run in that order by the method that calls them. The step changed in place the weights the stored
forward saved: the backward raises "modified by an inplace operation".

``field_stale_walks(ctx)`` runs each method of a class symbolically, with the methods of its
class that it calls as statements inlined (a few levels deep), over straight-line code: each
store of a field records the forward passes its value reaches (a module call that saves weights:
one applied to a graph, or one that saves its own; and what the fields and local names it reads
recorded), each with the number of steps its module's optimizers had taken; each step bumps the
count of the modules its optimizer is built from. A backward whose loss reaches (through fields,
local names and module calls, never through ``.detach()``) a forward recorded at a lower count is
a stale walk, unless a freeing backward already walked the fields it reads (not stored since): the
freed graph raises first (GF106). A method whose order is not straight (a field stored, a method called or an
optimizer stepped under a condition or in a loop) is not followed: nothing is guessed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from fixer.analysis.calls import BackwardCall, backward_calls, frees_graph
from fixer.analysis.class_model import class_methods
from fixer.analysis.flow import flowing_nodes
from fixer.analysis.graph import facts
from fixer.analysis.names import dotted
from fixer.analysis.protocol import optimizer_params
from fixer.analysis.saving_modules import saves_own_weights
from fixer.analysis.scopes import Scope, statement_index
from fixer.context import FileContext
from fixer.nodes import walk

MAX_DEPTH = 3
STRAIGHT = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Pass)
Record = tuple[str, int, ast.Call]  # (module, steps its optimizers had taken, the forward call)


@dataclass(frozen=True)
class FieldStaleWalk:
    method: Scope  # where the backward is
    backward: BackwardCall
    forward: ast.Call  # the stored forward pass whose saved weights changed
    step: ast.Call  # the step that changed them


def field_stale_walks(ctx: FileContext) -> list[FieldStaleWalk]:
    def compute() -> list[FieldStaleWalk]:
        owners = {o: m for o, m in optimizer_params(ctx).items() if o.startswith("self.") and m}
        if not owners:
            return []
        found: dict[int, FieldStaleWalk] = {}
        for cls in statement_index(ctx).classes:
            methods = class_methods(ctx, cls)
            for method in methods.values():
                run = _Run(ctx, methods, owners)
                run.method(method, 0)
                for walk_ in run.found:
                    found.setdefault(id(walk_.backward.node), walk_)
        return list(found.values())

    return ctx.memo("field_stale_walks", compute)


class _Run:
    def __init__(self, ctx: FileContext, methods: dict[str, Scope], owners: dict[str, frozenset[str]]) -> None:
        self.ctx, self.methods, self.owners = ctx, methods, owners
        self.fields: dict[str, frozenset[Record]] = {}  # field -> the forward passes its value reaches
        self.graphs: set[str] = set()  # fields whose value carries a graph
        self.counts: dict[str, int] = {}  # module -> steps taken by optimizers over it
        self.steps: dict[str, ast.Call] = {}  # module -> the last step that changed it
        self.freed: set[str] = set()  # fields a backward walked and freed, not stored since
        self.found: list[FieldStaleWalk] = []
        self.stopped = False

    def method(self, scope: Scope, depth: int) -> None:
        if depth > MAX_DEPTH or not scope.self_name or self.stopped:
            return
        self.block(scope, scope.node.body, {id(b.node): b for b in backward_calls(self.ctx, scope)}, depth)

    def block(self, scope: Scope, body: list[ast.stmt], backwards: dict[int, BackwardCall], depth: int) -> None:
        """The statements in order; an ``if`` is the path through its body (a finding needs one
        path on which the bug happens: the flags that guard a loss and its backward hold together)."""
        for stmt in body:
            if self.stopped:
                return
            if isinstance(stmt, (ast.If, ast.With, ast.Try)):
                self.block(scope, stmt.body, backwards, depth)
            elif isinstance(stmt, STRAIGHT):
                self.statement(scope, stmt, backwards, depth)
            elif self._touches(scope, stmt):
                self.stopped = True  # a loop: an order we do not follow

    def statement(self, scope: Scope, stmt: ast.stmt, backwards: dict[int, BackwardCall], depth: int) -> None:
        me = scope.self_name
        for node in walk(stmt):
            if isinstance(node, ast.Call) and id(node) in backwards:
                self._backward(scope, backwards[id(node)], node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = dotted(node.func.value)
                if node.func.attr == "step" and owner and owner.replace(me, "self", 1) in self.owners:
                    for module in self.owners[owner.replace(me, "self", 1)]:
                        self.counts[module] = self.counts.get(module, 0) + 1
                        self.steps[module] = node
                elif isinstance(node.func.value, ast.Name) and node.func.value.id == me and node.func.attr in self.methods:
                    self.method(self.methods[node.func.attr], depth + 1)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            stored = [dotted(t) for t in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target])]
            fields = [t[len(me) + 1 :] for t in stored if t and t.startswith(me + ".")]
            if fields:
                records = self._records(scope, stmt.value, stmt, 0)  # (each part of a tuple: what the whole reaches)
                self.fields.update(dict.fromkeys(fields, records))
                self.freed.difference_update(fields)
                carries = self._carries(scope, stmt.value, stmt, 0)
                self.graphs.update(f for f in fields if carries)
                self.graphs.difference_update(f for f in fields if not carries)

    def _records(self, scope: Scope, expr: ast.expr, at: ast.AST, depth: int) -> frozenset[Record]:
        me, graph = scope.self_name, facts(self.ctx, scope)
        found: set[Record] = set()
        for node in flowing_nodes(self.ctx, expr):
            name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if name and name.startswith(me + "."):
                found |= self.fields.get(name[len(me) + 1 :], frozenset())
            elif name and isinstance(node, ast.Name) and depth < MAX_DEPTH:
                for _, value in graph.reaching(name, at):
                    if value is not None:
                        found |= self._records(scope, value, at, depth + 1)
            elif isinstance(node, ast.Call) and (module := dotted(node.func)) and module.startswith(me + "."):
                module = "self" + module[len(me) :]
                if any(module in m for m in self.owners.values()):
                    if any(self._carries(scope, a, at, depth + 1) for a in node.args) or saves_own_weights(self.ctx, scope, node.func):
                        found.add((module, self.counts.get(module, 0), node))
        return frozenset(found)

    def _carries(self, scope: Scope, expr: ast.expr, at: ast.AST, depth: int) -> bool:
        """``expr`` carries a graph: the output of a module an optimizer trains, or a field or a local
        name holding one (the weights of a module applied to it are saved)."""
        me, graph = scope.self_name, facts(self.ctx, scope)
        for node in flowing_nodes(self.ctx, expr):
            name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if name and name.startswith(me + ".") and name[len(me) + 1 :] in self.graphs:
                return True
            if name and isinstance(node, ast.Name) and depth < MAX_DEPTH:
                if any(v is not None and self._carries(scope, v, at, depth + 1) for _, v in graph.reaching(name, at)):
                    return True
            if isinstance(node, ast.Call) and (module := dotted(node.func)) and module.startswith(me + "."):
                if any("self" + module[len(me) :] in m for m in self.owners.values()):
                    return True
        return False

    def _backward(self, scope: Scope, call: BackwardCall, node: ast.Call) -> None:
        me = scope.self_name
        read = {name[len(me) + 1 :] for n in walk(call.target) if (name := dotted(n)) and name.startswith(me + ".")}
        if read & self.freed:
            return  # the same value backpropagated again: its freed graph raises first (GF106)
        if frees_graph(call):
            self.freed |= read
        records = sorted(self._records(scope, call.target, node, 0), key=lambda r: (r[2].lineno, r[2].col_offset, r[0]))
        for module, count, forward in records:  # (in source order: the message is the same on every run)
            if self.counts.get(module, 0) > count:
                self.found.append(FieldStaleWalk(scope, call, forward, self.steps[module]))
                return

    def _touches(self, scope: Scope, stmt: ast.stmt) -> bool:
        """A compound statement that stores a field, steps, backpropagates or calls a method of the class."""
        me = scope.self_name
        for node in walk(stmt):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and dotted(node.value) == me:
                return True
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("step", "backward") or dotted(node.func.value) == me and node.func.attr in self.methods:
                    return True
        return False

