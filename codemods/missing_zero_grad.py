"""## What it does
Finds a training loop that calls `loss.backward()` and then `optimizer.step()` on every
iteration but never clears that optimizer's gradients: no `optimizer.zero_grad()` (nor
`model.zero_grad()`, nor `p.grad = None`) in the loop or in a function it calls; or a step
function (or method) that does both and that this file calls only inside loops that clear
nothing (`optimizer.zero_grad()` goes at its top). Also an `optimizer.step(closure)` (or
`step(self.loss_func)`) on a torch optimizer whose closure calls backward() but clears nothing.

## Why is this bad?
`backward()` adds to `.grad`; it does not overwrite it. Without zeroing, the gradient applied at
iteration *n* is the sum of the gradients of iterations 1..*n*: the updates grow with every
step, old batches keep pushing the parameters, and training diverges or stalls. LBFGS evaluates
its closure several times per step: without a zero_grad in it, each evaluation's gradient is
added to the previous ones and the line search follows a wrong direction.

## Example
```python
for inputs, targets in loader:
    loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.step()
```

## Use instead
```python
for inputs, targets in loader:
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.step()
```
The fix inserts `optimizer.zero_grad()` at the top of the loop body, before the forward pass
(for a closure: at the top of the closure).

The backward and the step may run in a function the loop calls (`train_step(model, opt, x)`,
`trainer.step(batch)` on an instance of a class of this file, or a function imported from another
project file): its events count as the loop's, with its parameters read as the arguments passed.
When that function of this file runs the whole step (backward, then step), the fix clears the
gradients at its top instead.
A step under a guard that holds on many iterations (`if torch.isfinite(norm):`) counts as one
that runs every iteration. Left alone: gradient accumulation (the backward under a condition, a
step that may run once per loop as `if i == len(loader) - 1:` or under a flag, the step after the
loop), `optimizer.step(closure)`, loops that zero gradients in any spelling or pass the optimizer
or model to a helper that might, backward calls through wrappers that manage gradients themselves
(`accelerator.backward`, `self.manual_backward`, DeepSpeed engines), and closures passed to optimizers built outside `torch.optim` (SAM-style wrappers zero inside `step`).

## Fix safety
Unsafe. Every step now applies only its own iteration's gradient instead of the running sum, so
all parameters the optimizer owns train differently; after the loop `.grad` holds the last
iteration's gradient instead of the sum. Accumulating across the whole loop is rarely intended,
but the rule cannot prove it is not.
"""

from __future__ import annotations

import ast
import re
from typing import Iterator, Optional

from fixer.analysis.class_model import held_for_life
from fixer.analysis.names import dotted
from fixer.analysis.call_events import Event, block_events, call_events, resolved_callee
from fixer.analysis.passes import pass_body
from fixer.analysis.recurring import runs_on_many_iterations
from fixer.analysis.calls import backward_calls, is_optimizer_construction, is_scaler, optimizer_call, optimizer_calls
from fixer.analysis.protocol import (
    call_loops,
    is_plain_step,
    optimizer_params,
    optimizer_scopes,
    scope_for,
    zeroes_for,
)
from fixer.analysis.statement_moves import attached_start, is_docstring
from fixer.analysis.scopes import LOOPS, Scope, assigned_values, scope_nodes, scopes, statement_index
from fixer.context import FileContext
from fixer.nodes import walk
from fixer.rule import Applicability, Diagnostic, Edit, Rule

# any spelling of clearing or rewriting gradients: p.grad = None, p.grad.zero_(), zero_grad, set_to_none
GRADIENT_RESET = re.compile(
    r"\.(_|main_)?grad\b(?!\s*\()|\w*(zero_?grad|grad_?zero|clear_?grad|reset_?grad|set_to_none)\w*"
    r"|\b(setattr|delattr)\s*\([^,]+,\s*[\"'](_|main_)?grad[\"']",  # setattr(p, "grad", None)
    re.IGNORECASE,
)
# framework callbacks and hooks, which often clear gradients for the loop (Keras-style fit loops)
HOOK_CALL = re.compile(r"(^|[._])(callbacks?|hooks?|plugins?|strategy|trainer|engine)([._]|$)|(^|\.)(on_\w+|fire|emit|trigger|call_hook)$", re.IGNORECASE)
MAX_HELPER_DEPTH = 2  # how deep the optimizer is followed through helpers that pass it on


class MissingZeroGrad(Rule):
    code = "GF203"
    name = "missing-zero-grad"
    summary = "A loop calls backward() and step() every iteration but never zero_grad()"
    fix_safety = "unsafe"

    def check(self, ctx: FileContext) -> Iterator[Diagnostic]:
        for scope in optimizer_scopes(ctx):
            for loop in scope_nodes(scope):
                if isinstance(loop, LOOPS):
                    yield from self._check_loop(ctx, scope, loop)
            yield from self._check_step_function(ctx, scope)
            yield from self._check_closures(ctx, scope)

    def _check_step_function(self, ctx: FileContext, scope: Scope) -> Iterator[Diagnostic]:
        """A function (or method) that backpropagates and steps, called by this file only inside
        loops that clear no gradient (nor call anything that might): each call is one iteration,
        and nothing ever clears the gradients it steps with."""
        if isinstance(scope.node, ast.Module) or any(isinstance(n, LOOPS) for n in scope_nodes(scope)):
            return
        events = block_events(ctx, scope, scope.node.body, through_calls=True)
        backwards = [e for e in events if e.kind == "backward"]
        if not backwards or any(e.spelling == "owner" or e.conditional for e in backwards) or any(e.kind == "zero_grad" for e in events):
            return
        steps = [e for e in events if e.kind == "step" and not e.conditional and e.index > backwards[0].index and is_plain_step(e)]
        if len(steps) != 1 or steps[0].via is not None or _zeroed_in_loop(ctx, scope, scope.node, steps[0].owner):
            return
        loops = call_loops(ctx, scope)
        if loops is None or any(id(caller.node) in _optimizer_scope_ids(own) for own, caller, _ in loops):
            return  # a caller's loop that shows optimizer calls is checked, with this call, as a loop
        for own, caller, loop in loops:
            if any(e.kind == "zero_grad" for e in block_events(own, caller, pass_body(loop), through_calls=True)) or _mentions_other_reset(own, loop):
                return
        step = steps[0]
        zero = f"{step.owner}.zero_grad()"
        where = "this file makes" if all(own is ctx for own, _, _ in loops) else "the project makes"
        message = (
            f"`{ctx.text(step.call)}` runs on every call of `{scope.node.name}`, which {where} only inside "
            f"loops, but `{step.owner}`'s gradients are never cleared: each step applies the sum of all gradients "
            f"so far; call `{zero}` before the forward pass"
        )
        edits = _at_top(ctx, scope.node, zero)
        yield self.diagnostic(ctx, step.site, message, edits, Applicability.UNSAFE, title=f"Insert `{zero}` at the top of `{scope.node.name}`")

    def _check_closures(self, ctx: FileContext, scope: Scope) -> Iterator[Diagnostic]:
        """``optimizer.step(closure)`` whose closure backpropagates but never clears the gradients:
        LBFGS evaluates the closure several times per step, each backward adds to the last."""
        for call in optimizer_calls(ctx, scope):
            if call.kind != "step" or call.via_scaler:
                continue
            closure = _closure_of(ctx, scope, call.node)
            if closure is None or not _backpropagates_plainly(ctx, closure) or not _built_by_torch(ctx, call.owner):
                continue  # SAM-style wrappers zero the gradients inside step() themselves
            loop = next((a for a in ctx.ancestors(call.node) if isinstance(a, LOOPS) or a is scope.node), scope.node)
            region = loop if loop is not scope.node else closure.node
            if _zeroed_in_loop(ctx, closure, closure.node, call.owner) or _zeroed_in_loop(ctx, scope, region, call.owner):
                continue
            if loop is scope.node and _resets_in_scope(ctx, scope, call.owner):
                continue
            yield self._report_closure(ctx, closure, call)

    def _report_closure(self, ctx: FileContext, closure: Scope, call) -> Diagnostic:
        zero = f"{call.owner}.zero_grad()"
        message = (
            f"`{ctx.text(call.node)}` evaluates `{closure.node.name}`, which calls backward() but never clears "
            f"`{call.owner}`'s gradients: each evaluation adds to the gradients of the previous ones (LBFGS "
            f"re-evaluates it several times per step); call `{zero}` at the top of the closure"
        )
        edits = _at_top(ctx, closure.node, zero)
        return self.diagnostic(ctx, call.node, message, edits, Applicability.UNSAFE, title=f"Insert `{zero}` at the top of the closure")

    def _check_loop(self, ctx: FileContext, scope: Scope, loop: ast.AST) -> Iterator[Diagnostic]:
        events = block_events(ctx, scope, pass_body(loop), through_calls=True)
        backwards = [e for e in events if e.kind == "backward"]
        if not backwards or any(e.spelling == "owner" for e in backwards):
            return  # accelerator / fabric / lightning / deepspeed manage gradients themselves
        first_backward = min(e.index for e in backwards if not e.conditional) if any(not e.conditional for e in backwards) else None
        if first_backward is None:
            return
        reported: set[str] = set()
        for step in events:
            if step.kind != "step" or step.owner in reported or step.index < first_backward:
                continue
            if step.conditional and (step.via is not None or not runs_on_many_iterations(ctx, step.call, loop)):
                continue  # may run once per loop (or its guard says nothing)
            if not is_plain_step(step) or _zeroed_in_loop(ctx, scope, loop, step.owner):
                continue
            if any(e.kind == "zero_grad" and e.via is not None and zeroes_for(ctx, e.owner or "", step.owner) is not False for e in events):
                continue  # a function the loop calls clears them (maybe one its callee calls)
            reported.add(step.owner)
            backward_first = any(e.kind == "backward" and e.via is step.via and not e.conditional for e in events[: events.index(step)])
            yield self._report(ctx, scope, loop, step, backward_first)

    def _report(self, ctx: FileContext, scope: Scope, loop: ast.AST, step: Event, backward_first: bool) -> Diagnostic:
        call = f"{step.owner}.zero_grad()"
        where = f"`{ctx.text(step.call)}`" if step.via is None else f"`{ctx.text(step.via)}` steps `{step.owner}` and"
        message = (
            f"{where} runs every iteration but `{step.owner}`'s gradients are never cleared in "
            f"the loop: each step applies the sum of all gradients so far; call `{call}` before the forward pass"
        )
        inside = _step_function_top(ctx, scope, step) if step.via is not None and backward_first else None
        if inside is not None:  # a whole training step in a function of this file: zero at its top
            first, call = inside
            where = f"`{ctx.text(step.via)}`"
        else:
            first, where = pass_body(loop)[0], "the loop"
        edits: list[Edit] = []
        if first.lineno > loop.lineno or inside is not None:
            at = attached_start(ctx, first)
            edits = [Edit(at, at, f"{ctx.indent_of(first.lineno)}{call}{ctx.newline}")]
        return self.diagnostic(ctx, step.site, message, edits, Applicability.UNSAFE, title=f"Insert `{call}` at the top of {where}")



def _at_top(ctx: FileContext, function: ast.AST, line: str) -> list[Edit]:
    """Insert ``line`` before the function's first statement (after its docstring), unless the
    body sits on the ``def`` line."""
    body = function.body
    first = body[1] if is_docstring(body[0]) and len(body) > 1 else body[0]
    if first.lineno <= function.lineno:
        return []
    at = attached_start(ctx, first)
    return [Edit(at, at, f"{ctx.indent_of(first.lineno)}{line}{ctx.newline}")]


def _optimizer_scope_ids(ctx: FileContext) -> frozenset[int]:
    """The scopes the rule checks (``optimizer_scopes``), by node, computed once per file."""
    return ctx.memo("missing_zero_grad_scopes", lambda: frozenset(id(s.node) for s in optimizer_scopes(ctx)))


def _step_function_top(ctx: FileContext, scope: Scope, step: Event) -> Optional[tuple[ast.stmt, str]]:
    """(first statement, zero_grad call in its names) of the function of this file the loop calls,
    which runs the backward and the step itself."""
    callee = resolved_callee(ctx, scope, step.via)
    inner = optimizer_call(ctx, step.call) if callee is not None and (callee.ctx or ctx) is ctx else None
    if inner is None or not any(step.call is n for n in walk(callee.node)):
        return None  # the step is in a helper of the helper: zero in the loop
    body = callee.node.body
    first = body[1] if is_docstring(body[0]) and len(body) > 1 else body[0]
    return (first, f"{inner.owner}.zero_grad()") if first.lineno > callee.node.lineno else None


def _closure_of(ctx: FileContext, scope: Scope, step: ast.Call) -> Optional[Scope]:
    """The local function passed to ``step`` (``step(closure)`` / ``step(closure=closure)``)."""
    argument = step.args[0] if len(step.args) == 1 and not step.keywords else None
    if argument is None and len(step.keywords) == 1 and step.keywords[0].arg == "closure" and not step.args:
        argument = step.keywords[0].value
    if isinstance(argument, ast.Name):
        found = [
            s for s in scopes(ctx)
            if isinstance(s.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.node.name == argument.id and scope_for(ctx, s.node) is scope
        ]
        return found[0] if len(found) == 1 and not found[0].node.args.args else None
    if isinstance(argument, ast.Attribute) and isinstance(argument.value, ast.Name) and argument.value.id == scope.self_name:
        found = [  # ``self.optimizer.step(self.loss_func)``: a method of this class without other parameters
            s for s in scopes(ctx)
            if s.class_node is scope.class_node and s.node.name == argument.attr and len(s.node.args.args) == 1
        ]
        return found[0] if len(found) == 1 and not found[0].node.decorator_list else None
    return None


def _built_by_torch(ctx: FileContext, optimizer: str) -> bool:
    """Every assignment of ``optimizer`` in the file builds a torch optimizer (``torch.optim.LBFGS``)."""
    values = [a.value for a in statement_index(ctx).assigns if len(a.targets) == 1 and dotted(a.targets[0]) == optimizer]
    return bool(values) and all(is_optimizer_construction(ctx, value) for value in values)


def _resets_in_scope(ctx: FileContext, scope: Scope, optimizer: str) -> bool:
    """Outside any loop: a zero_grad of a related object, or any other gradient reset, in the scope."""
    for node in scope_nodes(scope):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "zero_grad":
            if zeroes_for(ctx, dotted(node.func.value) or "", optimizer) is not False:
                return True
    return not isinstance(scope.node, ast.Module) and _mentions_other_reset(ctx, scope.node)


def _backpropagates_plainly(ctx: FileContext, closure: Scope) -> bool:
    """The closure calls ``loss.backward()`` (not through a wrapper that manages gradients)."""
    calls = backward_calls(ctx, closure)
    return any(c.kind in ("method", "autograd.backward", "scaler") for c in calls) and not any(c.kind == "owner" for c in calls)


def _zeroed_in_loop(ctx: FileContext, scope: Scope, loop: ast.AST, optimizer: str) -> bool:
    """True unless the loop provably never clears ``optimizer``'s gradients: every zero_grad in
    it is on an unrelated optimizer, nothing else touches ``.grad``, no helper it calls might, and
    the optimizer and its models are not rebuilt inside the loop."""
    models = optimizer_params(ctx).get(optimizer)
    objects = {optimizer} | set(models or ())
    for node in walk(loop):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "zero_grad":
            if zeroes_for(ctx, dotted(node.func.value) or "", optimizer) is not False:
                return True
        elif isinstance(node, ast.Call) and _helper_may_reset(ctx, scope, node, objects):
            return True
        elif isinstance(node, ast.Call) and dotted(node.func) == optimizer:
            return True  # a callable optimizer (Pyro's ``optim(params)``) is not a torch.optim one
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and _rebinds(node, objects):
            return True  # a fresh optimizer or model each iteration starts without gradients
        elif isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True  # the consumer of a generator loop may clear gradients between steps
    return _mentions_other_reset(ctx, loop)


def _mentions_other_reset(ctx: FileContext, loop: ast.AST) -> bool:
    """A gradient reset other than ``x.zero_grad()`` (which the caller judged by its owner):
    ``p.grad = None``, ``zero_grads(params)``, ``set_to_none``, ..."""
    text = ctx.text(loop)
    return any(not _is_zero_grad_method(text, m) for m in GRADIENT_RESET.finditer(text))


def _is_zero_grad_method(text: str, match: re.Match) -> bool:
    start, end = match.span()
    return match.group(0) == "zero_grad" and text[start - 1 : start] == "." and not text[end : end + 1].isalnum() and text[end : end + 1] != "_"


def _helper_may_reset(ctx: FileContext, scope: Scope, call: ast.Call, objects: set[str], depth: int = 0) -> bool:
    """A called function of this project that resets gradients, or passes the optimizer (or one
    of its models) on to a call that may; or an unknown function that receives one of them."""
    name = dotted(call.func) or ""
    callee = resolved_callee(ctx, scope, call)
    if callee is None and HOOK_CALL.search(name):
        return True
    if callee is not None:
        callee_ctx = callee.ctx or ctx
        if _callee_resets(ctx, scope, call, callee, objects) or _rebuilds_on_receiver(callee, call, objects):
            return True
        inner = _parameters_receiving(callee, call, objects)
        if callee.self_name:  # a method reaches the objects its instance keeps (self.optimizer), and hooks
            inner |= {field for field, name in held_for_life(ctx).items() if name in objects}
        return depth < MAX_HELPER_DEPTH and (bool(inner) or bool(callee.self_name)) and any(
            _helper_may_reset(callee_ctx, callee, node, inner, depth + 1) for node in walk(callee.node) if isinstance(node, ast.Call)
        )
    body = _bound_lambda(ctx, call.func)
    if body is not None:  # judged by what it does, whatever its name
        return bool(GRADIENT_RESET.search(ctx.text(body)))
    if scope.self_name and name.startswith(scope.self_name + ".") and name.count(".") == 1:
        return not _is_attribute_of_class(scope, name.split(".", 1)[1])  # inherited method: unknown
    arguments = list(call.args) + [k.value for k in call.keywords]
    via_scaler = isinstance(call.func, ast.Attribute) and call.func.attr in ("step", "unscale_") and is_scaler(ctx, call.func.value)
    return any(dotted(arg) in objects for arg in arguments) and not via_scaler


def _callee_resets(ctx: FileContext, scope: Scope, call: ast.Call, callee: Scope, objects: set[str]) -> bool:
    """The callee may clear the gradients of an optimizer among ``objects``: its text resets
    gradients, unless every reset is an ``x.zero_grad()`` whose owner, in the caller's names
    (call_events), is known to belong to other parameters."""
    text = (callee.ctx or ctx).text(callee.node)
    resets = list(GRADIENT_RESET.finditer(text))
    optimizers = [o for o in objects if o in optimizer_params(ctx)]
    if not resets or any(not _is_zero_grad_method(text, m) for m in resets) or not optimizers:
        return bool(resets)
    events = call_events(ctx, scope, call)
    if events is None:
        return True
    return any(e.kind == "zero_grad" and (e.owner is None or zeroes_for(ctx, e.owner, o) is not False) for e in events for o in optimizers)


def _rebuilds_on_receiver(callee: Scope, call: ast.Call, objects: set[str]) -> bool:
    """A method that assigns a fresh optimizer or model to one of ``objects`` through ``self``
    (``trainer.step()`` doing ``self.optimizer = SGD(...)``): each call starts without gradients."""
    receiver = dotted(call.func.value) if isinstance(call.func, ast.Attribute) else None
    if not callee.self_name or not receiver:
        return False
    prefix = callee.self_name + "."
    return any(
        isinstance(node, ast.Assign) and any(
            (name := dotted(t)) and name.startswith(prefix) and receiver + name[len(callee.self_name):] in objects for t in node.targets
        )
        for node in walk(callee.node)
    )


def _bound_lambda(ctx: FileContext, func: ast.expr) -> Optional[ast.Lambda]:
    """The lambda a name is bound to, when every binding of it in the file is that one lambda."""
    if not isinstance(func, ast.Name):
        return None
    values = assigned_values(ctx, func.id)
    return values[0] if len(values) == 1 and isinstance(values[0], ast.Lambda) else None


def _parameters_receiving(callee: Scope, call: ast.Call, objects: set[str]) -> set[str]:
    """The callee's parameters that ``call`` binds to one of ``objects``."""
    args = callee.node.args
    positional = [a.arg for a in args.posonlyargs + args.args][1 if callee.self_name and "." in (dotted(call.func) or "") else 0:]
    bound = {param for param, arg in zip(positional, call.args) if dotted(arg) in objects}
    return bound | {k.arg for k in call.keywords if k.arg and dotted(k.value) in objects}


def _is_attribute_of_class(scope: Scope, attr: str) -> bool:
    """``self.attr`` is assigned in the class (a module or callable stored on the instance)."""
    if scope.class_node is None:
        return False
    for node in walk(scope.class_node):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == attr for target in node.targets for t in walk(target)
        ):
            return True
    return False


def _rebinds(node: ast.AST, objects: set[str]) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return any(dotted(t) in objects for target in targets for t in walk(target))
