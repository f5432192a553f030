"""## What it does
Finds a loss tensor that is added to a running total (`running_loss += loss`,
`total = total + loss`, `losses.append(loss)`, `preds.extend(out)`,
`preds = torch.cat((preds, out))`, `self.total += loss`, an average meter's
`losses.update(loss, n)` or `meters["loss"].update(loss, n)` (an object whose class, read in the
project, keeps the argument in `update`: `self.sum += val * n`; a class it cannot read is no
meter, whatever its name), a record
`history.append({"loss": loss})`, `losses.append(agent.update(batch))` whose method (of a class
of this file or imported from another project file) returns the loss it backpropagated) in a
training loop that
backpropagates every iteration, when the total lives longer than the iteration and is never
backpropagated itself. A LightningModule's `training_step` counts as such a loop (the framework
backpropagates the loss it returns, so such a file is read even with no backward in its text):
`self.training_step_outputs.append(loss)`. Also a
validation loop without `torch.no_grad()` (`val_loss += loss`) in a function whose own backward
shows that gradients are recorded, or whose callers all run recording them (no `torch.no_grad()`
around any call), when that function never switches the grad mode and the total is only printed,
logged, turned into a number, or returned to callers that only read numbers from it.

A method that adds the elements of a container argument into its object's fields
(`for name, value in losses.items(): self.sums[name] += value`) is reported at that store when a
loop that backpropagates passes it a dict, list or tuple holding a graph (`meters.update(losses)`
after `losses = {"loss": loss, ...}` or a function returning such a dict), on an object made
before that loop, and the fields are read only by the object's own methods, as numbers. The fix
is made there: `value.item()` when every reader converts with `float()`/`int()`, `value.detach()`
when one reads a tensor (`.item()`), none unless every call passes tensors.

Only values proven to carry a graph count: a call of a function or method of the project is judged by
what it returns (`self.update_model()` returning `loss.item()` is a number, whatever its name), a call
graphfix cannot see into is unknown, and an object known only by its `.backward()` method may be a
loss wrapper (its `get_loss()` is unknown). A sum of `autograd.grad(..., create_graph=True)` gradients
that is returned, stored or passed on is left alone: such a sum is built to be differentiated, and
`create_graph=True` gradients are not the iteration's backward.

## Why is this bad?
`loss` carries its autograd graph. Adding it to a total that survives the iteration links every
iteration's graph to the total, so none of them is freed: memory grows with every step until the
process runs out of it (the PyTorch FAQ's first out-of-memory example). The total is only used for
logging or averaging, so the graph buys nothing.

## Example
```python
running_loss = 0.0
for inputs, targets in loader:
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.step()
    running_loss += loss
```

## Use instead
```python
    running_loss += loss.item()
```
`.item()` is used when the loss is a scalar (it was backpropagated without a gradient argument,
or it is a full reduction such as `q.mean()`, directly or as what a project function returns) and
the total is only used as a number; otherwise `.detach()`, which keeps the total a tensor
(for `torch.stack(losses)`, `total.item()` and the like). The tensors of a logged record and the
losses of a validation loop are detached (better still, run validation under `torch.no_grad()`).

## Fix safety
Safe. Gradients and parameters are unchanged: the total never reaches a backward call (the rule
does not fire when it does, as in summing several losses and calling backward once). With
`.item()` the total becomes a Python float, so `print(total)` shows `1.23` instead of
`tensor(1.23, grad_fn=...)`.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.calls import AUTOGRAD_GRAD, BACKWARD_TEXT, backpropagates_in, backward_calls, backward_calls_in, training_call_text
from fixer.analysis.graph import GraphFacts, Kind, facts
from fixer.analysis.graph_reuse import inside
from fixer.analysis.reported import TERMINAL_CALLS, TERMINAL_METHODS, evaluation_loop, fed_by_graph
from fixer.analysis.held_values import held_name
from fixer.analysis.kept_elements import KeptElements, kept_elements
from fixer.analysis.meters import container, is_meter
from fixer.analysis.names import dotted, last_name, qualified
from fixer.analysis.carried_flow import position
from fixer.analysis.callees import called_function
from fixer.analysis.retained_walks import returned_only_for_numbers
from fixer.analysis.scopes import Scope, enclosing_loops, scope_nodes, scopes
from fixer.analysis.importers import project_call_sites
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.call_sites import argument_of, parameter_position
from fixer.analysis.threaded import persistent_argument, threaded_parameter
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.rule import Diagnostic, Edit, Rule

CONCATENATE = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.vstack", "torch.hstack", "torch.row_stack"})
CONCATENATE_NAMES = frozenset(name.split(".")[1] for name in CONCATENATE)
ATOMS = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)


class LossAccumulatedWithGraph(Rule):
    code = "GF301"
    name = "loss-accumulated-with-graph"
    summary = "A loss added to a running total keeps every iteration's autograd graph alive"
    fix_safety = "safe"

    @classmethod
    def applies_to(cls, data: bytes) -> bool:
        """Also a LightningModule with no backward in its text: the framework backpropagates what
        ``training_step`` returns."""
        return super().applies_to(data) or b"def training_step" in data and b"LightningModule" in data

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in scopes(ctx):
            found = list(self._candidates(ctx, scope))
            totals = {accumulator for _, accumulator, _ in found}
            for diagnostic, accumulator, part in found:
                # `history.append(epoch_loss / n)` is fixed by fixing `epoch_loss` itself
                if not (_names_in(part) & (totals - {accumulator})):
                    yield diagnostic
        for kept in kept_elements(ctx):  # meters.update(losses): `self.sums[name] += value` in the meter
            yield self._kept(ctx, kept)

    def _kept(self, ctx: FileContext, kept: KeptElements) -> Diagnostic:
        store, field = kept.store, f"{kept.store.parameter}"
        texts = sorted({ctx.text(e) for e in store.elements})
        new = ", ".join(f"`{t}.{kept.fix}()`" for t in texts) if kept.fix else None
        message = (f"`{ctx.text(store.stmt).split(chr(10))[0].strip()}` keeps the elements of `{field}` with their autograd graph "
                   f"(called with graphs at line {kept.call.lineno}), keeping every iteration's graph alive")
        if new is None:
            return self.diagnostic(ctx, store.stmt, message + "; store numbers or detached tensors")
        edits = [Edit(*ctx.span(e), f"{ctx.text(e)}.{kept.fix}()") for e in store.elements]
        return self.diagnostic(ctx, store.stmt, f"{message}; store {new}", edits, title=f"Store {new}")

    def _candidates(self, ctx: FileContext, scope: Scope) -> Iterator[tuple[Diagnostic, str, ast.expr]]:
        framework_step = _framework_training_step(scope)
        evaluation_only = not framework_step and not ctx.mentions(scope.node, BACKWARD_TEXT) and not ctx.mentions(scope.node, training_call_text(ctx))
        if evaluation_only and not any(_accumulation(n) for n in scope_nodes(scope)):
            return  # nothing here backpropagates, and nothing accumulates
        graph = facts(ctx, scope)
        for node in scope_nodes(scope):
            found = _accumulation(node, graph)
            if found is None:
                continue
            stmt, accumulator, value = found
            value = held_name(ctx, scope, value) or value  # total += out["loss"]: the value of loss
            if under_no_grad(ctx, stmt) or not _outlives_iteration(ctx, scope, graph, stmt, accumulator):
                continue
            if _escapes(ctx, scope, graph, accumulator) and _differentiable_gradient(ctx, graph, value, stmt):
                continue  # a returned sum of create_graph=True gradients is meant to be backpropagated
            iteration = _iteration(ctx, scope, stmt)
            if evaluation_only and not (evaluation_loop(ctx, scope, graph, stmt, accumulator, value, _is_accumulation_of)
                                        and fed_by_graph(graph, value, stmt)):
                continue
            if evaluation_only:
                evaluation = True
            elif _frees_graphs_in(ctx, scope, iteration) or (framework_step and iteration is scope.node):
                evaluation = False
            elif evaluation_loop(ctx, scope, graph, stmt, accumulator, value, _is_accumulation_of):
                evaluation = True
            elif _calls_training_method(ctx, scope, iteration):
                evaluation = False
            else:
                continue  # not a loop that backpropagates every iteration, nor an evaluation loop of a training function
            record = _logged_record(ctx, scope, graph, value, stmt)
            if record is not None:  # history.append({"loss": loss, ...})
                parts = [v for v in record.values if graph.carries_graph(v, stmt)]
                if not parts or any(isinstance(v, ast.Name) and graph.sometimes_detached(v.id, stmt) for v in parts):
                    continue
                if _reaches_backward(ctx, scope, graph, accumulator):
                    continue
                edits = [Edit(*ctx.span(p), _detached(ctx, p, "detach")) for p in parts]
                names = ", ".join(f"`{ctx.text(p)}`" for p in parts)
                yield self.diagnostic(
                    ctx,
                    stmt,
                    f"`{accumulator}` keeps records holding {names} with their autograd graph, keeping every "
                    "iteration's graph alive; store detached values",
                    edits,
                    title="Store detached values",
                ), accumulator, parts[0]
                continue
            part = _graph_part(graph, value, stmt)
            if part is None and _returns_backpropagated(ctx, scope, value):
                part = value  # losses.append(agent.update(batch)): the method returns the loss it backpropagated
            if part is None or _reaches_backward(ctx, scope, graph, accumulator):
                continue
            numeric = _is_meter_update(node) or _numeric_use(ctx, scope, graph, accumulator, node)
            scalar = _scalar_loss(ctx, scope, part) or _full_reduction(ctx, scope, graph, part, stmt)
            method = "item" if scalar and numeric and not evaluation else "detach"
            text = ctx.text(part)
            new = _detached(ctx, part, method)
            start, end = ctx.span(part)
            diagnostic = self.diagnostic(
                ctx,
                stmt,
                f"`{accumulator}` accumulates `{text}` with its autograd graph, keeping every iteration's "
                f"graph alive; accumulate `{new}`",
                [Edit(start, end, new)],
                title=f"Accumulate `{new}`",
            )
            yield diagnostic, accumulator, part


def _detached(ctx: FileContext, part: ast.expr, method: str) -> str:
    text = ctx.text(part)
    return f"{text}.{method}()" if isinstance(part, ATOMS) else f"({text}).{method}()"


def _logged_record(ctx: FileContext, scope: Scope, graph: GraphFacts, value: ast.expr, at: ast.stmt) -> Optional[ast.Dict]:
    """The dict literal appended (``history.append({"loss": loss})``), or the one a local name was
    given in the same iteration (``logs = {...}; history.append(logs)``) when nothing else reads
    the name."""
    if isinstance(value, ast.Dict):
        return value
    if not isinstance(value, ast.Name):
        return None
    defs = graph.assignments.get(value.id, [])
    if len(defs) != 1 or not isinstance(defs[0][1], ast.Dict):
        return None
    stmt, record = defs[0]
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    iteration = _iteration(ctx, scope, at)  # a loop's pass, or a step function's call
    if iteration is not scope.node and not inside(ctx, stmt, iteration) or (stmt.lineno, stmt.col_offset) > (at.lineno, at.col_offset):
        return None
    reads = [n for n in scope_nodes(scope) if isinstance(n, ast.Name) and n.id == value.id and isinstance(n.ctx, ast.Load) and n is not value]
    return record if all(_returned_for_numbers(ctx, scope, n) for n in reads) else None


def _returned_for_numbers(ctx: FileContext, scope: Scope, name: ast.Name) -> bool:
    """``return ..., record`` that every caller drops or reads only for numbers."""
    parent = ctx.parent(name)
    returned = ctx.parent(parent) if isinstance(parent, ast.Tuple) else parent
    return isinstance(returned, ast.Return) and returned_only_for_numbers(ctx, scope, returned, name)


def _accumulation(node: ast.AST, graph: Optional[GraphFacts] = None) -> Optional[tuple[ast.stmt, str, ast.expr]]:
    """(statement, accumulator name, added value) for ``acc += v``, ``acc = acc + v``, ``acc.append(v)``."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        target = node.target
        if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
            target = target.value  # metrics["loss"] += loss: the dict is the total's owner
        name = dotted(target)
        return (node, name, node.value) if name else None
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Add):
        name = dotted(node.targets[0])
        if name and dotted(node.value.left) == name:
            return node, name, node.value.right
        if name and dotted(node.value.right) == name:
            return node, name, node.value.left
        return None
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and getattr(node.value.func, "attr", "") in CONCATENATE_NAMES:
        call, name = node.value, dotted(node.targets[0])  # preds = torch.cat((preds, output), 0)
        if name and len(node.targets) == 1 and dotted(call.func) in CONCATENATE and call.args and isinstance(call.args[0], (ast.Tuple, ast.List)):
            elements = call.args[0].elts
            if len(elements) == 2 and name in [dotted(e) for e in elements]:
                other = [e for e in elements if dotted(e) != name]
                return (node, name, other[0]) if len(other) == 1 else None
        return None
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        call = node.value
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("append", "extend") and len(call.args) == 1 and not call.keywords:
            base = call.func.value
            while isinstance(base, ast.Subscript):  # history["loss"].append(loss)
                base = base.value
            name = dotted(base)
            return (node, name, call.args[0]) if name else None
        if isinstance(call.func, ast.Attribute) and call.func.attr == "update" and call.args and is_meter(call.func.value, graph):
            name = dotted(container(call.func.value))  # AverageMeter.update(loss, n) keeps `self.sum += val * n`
            return (node, name, call.args[0]) if name else None
    return None


def _is_meter_update(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and getattr(node.value.func, "attr", "") == "update"


def _iteration(ctx: FileContext, scope: Scope, stmt: ast.stmt) -> ast.AST:
    """The innermost loop around ``stmt``, or the whole function for a ``self.`` total (one call = one step)."""
    loops = enclosing_loops(ctx, stmt, scope)
    return loops[0] if loops else scope.node


def _outlives_iteration(ctx: FileContext, scope: Scope, graph: GraphFacts, stmt: ast.stmt, accumulator: str) -> bool:
    """The total is created outside the innermost loop (or is an attribute of ``self`` not reset
    earlier in the method), so it carries values from one iteration into the next."""
    loops = enclosing_loops(ctx, stmt, scope)
    own = [s for s, _ in graph.assignments.get(accumulator, []) if s is not stmt and not _is_accumulation_of(s, accumulator)]
    if loops:
        if not any(s for s in own if inside(ctx, s, loops[0])):
            return True
        return False
    head = accumulator.split(".")[0]
    if scope.self_name and head == scope.self_name and "." in accumulator:
        return not any((s.lineno, s.col_offset) < (stmt.lineno, stmt.col_offset) for s in own)
    if "." not in accumulator and not any(position(s) < position(stmt) for s in own):
        if isinstance(stmt, ast.Expr) or isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Subscript):
            return persistent_argument(ctx, scope, accumulator)  # losses.append(loss) on the caller's list, the same each call
        return threaded_parameter(ctx, scope, accumulator)  # total, loss = step(x, total) in a loop
    return False


def _is_accumulation_of(stmt: ast.AST, accumulator: str) -> bool:
    found = _accumulation(stmt)
    return found is not None and found[1] == accumulator


def _graph_part(graph: GraphFacts, value: ast.expr, at: ast.AST) -> Optional[ast.expr]:
    """The smallest sub-expression of ``value`` that carries the graph (``loss`` in ``loss * n``)."""
    if not graph.carries_graph(value, at):
        return None
    if any(graph.sometimes_detached(name, at) for name in _names_in(value)):
        return None  # `if backward_now: loss.backward(); loss = loss.detach()`: handled on purpose
    while isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        left, right = graph.carries_graph(value.left, at), graph.carries_graph(value.right, at)
        if left == right:
            break
        value = value.left if left else value.right
    return value


def _names_in(expr: ast.AST) -> set[str]:
    return {name for node in walk(expr) if (name := dotted(node))}


def _reaches_backward(ctx: FileContext, scope: Scope, graph: GraphFacts, accumulator: str) -> bool:
    """True if the total (or anything computed from it) is backpropagated: summing losses on purpose."""
    backwarded = ctx.memo(("backwarded_names", id(scope.node)), lambda: {n for c in backward_calls(ctx, scope) for n in _names_in(c.target)})
    return bool(backwarded & _derived(graph, accumulator))  # the names found once a scope, not once a total


def _derived(graph: GraphFacts, accumulator: str) -> set[str]:
    """The total and every name computed from it (``for old in memory`` takes its elements)."""
    users = graph.ctx.memo(("derived_users", id(graph.scope.node)), lambda: _users(graph))  # once a scope, not a total
    derived, todo = {accumulator}, [accumulator]
    while todo:
        for name in users.get(todo.pop(), set()) - derived:
            derived.add(name)
            todo.append(name)
    return derived


def _users(graph: GraphFacts) -> dict[str, set[str]]:
    """For each name, the names of the scope given a value computed from it."""
    users: dict[str, set[str]] = {}
    for name, defs in graph.assignments.items():
        for stmt, value in defs:
            source = stmt.iter if isinstance(stmt, (ast.For, ast.AsyncFor)) and value is None else value
            for used in _names_in(source) if source is not None else ():
                users.setdefault(used, set()).add(name)
    return users


def _frees_graphs_in(ctx: FileContext, scope: Scope, region: ast.AST) -> bool:
    """``backpropagates_in``, where ``autograd.grad(..., create_graph=True)`` does not count: it builds
    a quantity meant to be differentiated again, not the iteration's backward."""
    if not backpropagates_in(ctx, scope, region):
        return False
    calls = backward_calls(ctx, scope) if region is scope.node else backward_calls_in(ctx, scope, region)
    return not calls or any(c.kind != "autograd.grad" or c.flag("create_graph") is False for c in calls)


def _escapes(ctx: FileContext, scope: Scope, graph: GraphFacts, accumulator: str) -> bool:
    """The total (or a name computed from it) is returned, stored on an object or passed to a call
    other than a report: its caller may backpropagate it."""
    return bool(_derived(graph, accumulator) & ctx.memo(("escaping_names", id(scope.node)), lambda: _escaping_names(scope)))


def _escaping_names(scope: Scope) -> set[str]:
    """The names whose values leave the scope: returned, stored on an object, passed to a call."""
    names: set[str] = set()
    for node in scope_nodes(scope):
        if isinstance(node, ast.Return) and node.value is not None:
            names |= _names_in(node.value)
        if isinstance(node, ast.Assign) and any(not isinstance(t, ast.Name) for t in node.targets):
            names |= _names_in(node.value)
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in TERMINAL_CALLS):
            if getattr(node.func, "attr", None) not in TERMINAL_METHODS:
                names.update(name for a in node.args if (name := dotted(a)))
    return names


def _differentiable_gradient(ctx: FileContext, graph: GraphFacts, value: ast.expr, at: ast.AST, depth: int = 3) -> bool:
    """``value`` holds a gradient taken with ``create_graph=True`` (directly or through local names)."""
    for node in walk(value):
        if isinstance(node, ast.Call) and qualified(ctx, node.func) in AUTOGRAD_GRAD:
            flag = next((k.value for k in node.keywords if k.arg == "create_graph"), None)
            if flag is not None and not (isinstance(flag, ast.Constant) and not flag.value):
                return True
        if depth and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if any(v is not None and _differentiable_gradient(ctx, graph, v, s, depth - 1) for s, v in graph.reaching(node.id, at)):
                return True
    return False


def _scalar_loss(ctx: FileContext, scope: Scope, part: ast.expr) -> bool:
    """The value is a name backpropagated with a bare ``.backward()`` (or ``scaler.scale(x).backward()``,
    ``accelerator.backward(x)``): it is a one-element tensor."""
    name = dotted(part)
    return bool(name) and any(
        call.target_name == name and (call.kind in ("scaler", "owner") or call.kind == "method" and not call.node.args)
        for call in backward_calls(ctx, scope)
    )


FULL_REDUCTIONS = frozenset({"mean", "sum", "prod", "norm", "std", "var", "max", "min"})


def _full_reduction(ctx: FileContext, scope: Scope, graph: GraphFacts, value: ast.expr, at: ast.AST, depth: int = 2) -> bool:
    """``value`` is a one-element tensor by construction: ``x.mean()`` (no dimension), a name (or a
    field of ``self``) bound only to such values, or a call of a function of this project whose every return is one."""
    if isinstance(value, (ast.Name, ast.Attribute)) and dotted(value):  # ``mae``, ``self.mae``
        defs = graph.reaching(dotted(value), at)
        return bool(defs) and depth > 0 and all(v is not None and _full_reduction(ctx, scope, graph, v, s, depth - 1) for s, v in defs)
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr in FULL_REDUCTIONS and not value.args and not value.keywords:
        return True
    callee = called_function(ctx, scope, func)
    if callee is None or depth <= 0:
        return False
    returns = [n.value for n in scope_nodes(callee) if isinstance(n, ast.Return)]
    inner = facts(callee.ctx or ctx, callee)
    return bool(returns) and all(
        v is not None and _full_reduction(callee.ctx or ctx, callee, inner, v, v, depth - 1) for v in returns
    )


def _numeric_in_callers(ctx: FileContext, scope: Scope, parameter: str, depth: int) -> bool:
    """Every call site passes, for ``parameter``, a name its caller starts as a number and uses
    only as one (the call binding the result back to it is the accumulation there)."""
    position = parameter_position(scope, parameter)
    sites = list(project_call_sites(ctx, scope)) if position is not None else []
    for own, caller, call in sites:
        argument = argument_of(call, parameter, position) if call is not None else None
        if caller is scope or not isinstance(argument, ast.Name):
            return False
        if not _numeric_use(own, caller, facts(own, caller), argument.id, own.statement_of(call), depth - 1):
            return False
    return bool(sites)


def _numeric_use(ctx: FileContext, scope: Scope, graph: GraphFacts, accumulator: str, accumulation: ast.AST, depth: int = 2) -> bool:
    """The total starts as a Python number (or empty list) and is never used as a tensor. A total
    threaded through a step function (``total, loss = step(x, total)``) is judged in each caller."""
    initial = [v for s, v in graph.assignments.get(accumulator, []) if s is not accumulation and not _is_accumulation_of(s, accumulator)]
    if not initial and "." not in accumulator and depth > 0 and threaded_parameter(ctx, scope, accumulator):
        return _numeric_in_callers(ctx, scope, accumulator, depth)
    if not initial:
        return False  # e.g. self.total set in another method: type unknown
    for value in initial:
        if not (isinstance(value, ast.Constant) and isinstance(value.value, (int, float)) or isinstance(value, ast.List) and not value.elts):
            return False
    return accumulator not in ctx.memo(("used_as_tensors", id(scope.node)), lambda: _used_as_tensors(ctx, scope))


def _used_as_tensors(ctx: FileContext, scope: Scope) -> set[str]:
    """The names the scope uses as tensors (found once a scope, not once a total)."""
    used: set[str] = set()
    for node in scope_nodes(scope):
        if isinstance(node, ast.Attribute) and node.attr != "append":
            used.add(dotted(node.value))  # total.item(), total.cpu(), ...
        if isinstance(node, ast.Subscript) and isinstance(ctx.parent(node), ast.Attribute):
            used.add(dotted(node.value))  # losses[-1].item()
        if isinstance(node, ast.Call) and (qualified(ctx, node.func) or "").startswith("torch."):
            used.update(dotted(arg) for arg in node.args)  # torch.stack(losses)
    return used




def _instance_method(ctx: FileContext, scope: Scope, func: ast.expr) -> Optional[Scope]:
    """The method ``agent.update`` runs, when ``agent`` only ever holds an instance of one class
    of the project (``Agent(...)`` of this file or imported from another)."""
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)) or func.value.id == scope.self_name:
        return None
    method = called_function(ctx, scope, func)
    return method if method is not None and method.class_node is not None else None


def _calls_training_method(ctx: FileContext, scope: Scope, region: ast.AST) -> bool:
    nodes = scope_nodes(scope) if region is scope.node else walk(region)
    for node in nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            method = _instance_method(ctx, scope, node.func)
            if method is not None and backward_calls(method.ctx or ctx, method):
                return True
    return False


def _returns_backpropagated(ctx: FileContext, scope: Scope, value: ast.expr) -> bool:
    """``agent.update(...)`` whose method returns, on every path, a name it backpropagated."""
    if not isinstance(value, ast.Call):
        return False
    method = _instance_method(ctx, scope, value.func)
    if method is None:
        return False
    home = method.ctx or ctx
    returns = [n.value for n in scope_nodes(method) if isinstance(n, ast.Return)]
    backwarded = {call.target_name for call in backward_calls(home, method)} - {None}
    callee = facts(home, method)
    return bool(returns) and all(
        isinstance(v, ast.Name) and v.id in backwarded and callee.kind(v, v) == Kind.GRAPH for v in returns
    )


def _framework_training_step(scope: Scope) -> bool:
    """``training_step`` of a ``LightningModule``: the framework backpropagates the loss it returns
    after every call, so a ``self.`` total it adds to outlives one step's graph."""
    if scope.class_node is None or getattr(scope.node, "name", "") != "training_step":
        return False
    return any((last_name(base) or "").endswith("LightningModule") for base in scope.class_node.bases)
