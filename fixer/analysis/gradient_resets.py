"""Whether gradients may be cleared (GF203's query): a ``zero_grad()`` of a related optimizer or
model, any other spelling of a reset (``p.grad = None``, ``set_to_none``, ``zero_grads(params)``),
a helper of this project that may reset them (followed ``MAX_HELPER_DEPTH`` calls deep through
the parameters that receive the optimizer or its models), an unknown function or hook that
receives them, and an optimizer or model rebuilt inside the loop. The answer leans to "may":
a rule that reports a missing reset must not report one that happens out of sight."""

from __future__ import annotations

import ast
import re
from typing import Optional

from fixer.analysis.arguments import parameters
from fixer.analysis.bindings import module_classes
from fixer.analysis.call_events import call_events, resolved_callee, skipped_on_call
from fixer.analysis.scalers import is_scaler
from fixer.analysis.class_model import held_for_life
from fixer.analysis.names import dotted
from fixer.analysis.protocol import optimizer_params, zeroes_for
from fixer.analysis.scopes import Scope, assigned_values, scope_nodes
from fixer.analysis.vocabulary import MODULE_METHODS_KEEPING_GRADIENTS
from fixer.context import FileContext
from fixer.nodes import walk

# any spelling of clearing or rewriting gradients: p.grad = None, p.grad.zero_(), zero_grad, set_to_none
GRADIENT_RESET = re.compile(
    r"\.(_|main_)?grad\b(?!\s*\()|\w*(zero_?grad|grad_?zero|clear_?grad|reset_?grad|set_to_none)\w*"
    r"|\b(setattr|delattr)\s*\([^,]+,\s*[\"'](_|main_)?grad[\"']",  # setattr(p, "grad", None)
    re.IGNORECASE,
)
GRAD_ATTRIBUTE = re.compile(r"\.(_|main_)?grad")
IN_PLACE_CALL = re.compile(r"\w_\s*\(")  # ``x.zero_()``, ``clip_grad_norm_(...)``: may write a gradient a name holds
WRITTEN = re.compile(r"\s*(?:=(?!=)|[-+*/@%&|^]=|[,)])")  # stored into, or handed to a call, after ``.grad``


def reset_mentions(text: str) -> list["re.Match[str]"]:
    """``GRADIENT_RESET``'s matches in ``text`` that may clear or rewrite gradients. A read of
    ``.grad`` (``[p.grad for p in params]``, ``p.grad.norm()``) writes nothing: it counts only when
    it is stored into, deleted, handed to a call, or when the text makes an in-place call anywhere
    (which may write a gradient through the name it was read into)."""
    in_place = IN_PLACE_CALL.search(text) is not None
    found = []
    for match in GRADIENT_RESET.finditer(text):
        line = text[text.rfind("\n", 0, match.start()) + 1 : match.start()].lstrip()
        if GRAD_ATTRIBUTE.fullmatch(match.group(0)) and not in_place and not WRITTEN.match(text, match.end()) and not line.startswith("del "):
            continue  # a read
        found.append(match)
    return found


# framework callbacks and hooks, which often clear gradients for the loop (Keras-style fit loops)
HOOK_CALL = re.compile(r"(^|[._])(callbacks?|hooks?|plugins?|strategy|trainer|engine)([._]|$)|(^|\.)(on_\w+|fire|emit|trigger|call_hook)$", re.IGNORECASE)
MAX_HELPER_DEPTH = 2  # how deep the optimizer is followed through helpers that pass it on


def resets_in_scope(ctx: FileContext, scope: Scope, optimizer: str) -> bool:
    """Outside any loop: a zero_grad of a related object, or any other gradient reset, in the scope."""
    for node in scope_nodes(scope):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "zero_grad":
            if zeroes_for(ctx, dotted(node.func.value) or "", optimizer) is not False:
                return True
    return not isinstance(scope.node, ast.Module) and mentions_other_reset(ctx, scope.node)


def zeroed_in_loop(ctx: FileContext, scope: Scope, loop: ast.AST, optimizer: str) -> bool:
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
    return mentions_other_reset(ctx, loop)


def mentions_other_reset(ctx: FileContext, loop: ast.AST) -> bool:
    """A gradient reset other than ``x.zero_grad()`` (which the caller judged by its owner):
    ``p.grad = None``, ``zero_grads(params)``, ``set_to_none``, ..."""
    text = ctx.text(loop)
    return any(not _is_zero_grad_method(text, m) for m in reset_mentions(text))


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
            _helper_may_reset(callee_ctx, callee, node, inner, depth + 1) for node in walk(callee.node)
            if isinstance(node, ast.Call) and not skipped_on_call(callee_ctx, callee, call, node)
        )
    body = _bound_lambda(ctx, call.func)
    if body is not None:  # judged by what it does, whatever its name
        return bool(reset_mentions(ctx.text(body)))
    if scope.self_name and name.startswith(scope.self_name + ".") and name.count(".") == 1:
        method = name.split(".", 1)[1]
        if method in MODULE_METHODS_KEEPING_GRADIENTS and scope.class_node is not None and scope.class_node.name in module_classes(ctx):
            return False  # nn.Module's own method (``self.parameters()``), in a class that derives it
        return not _is_attribute_of_class(scope, method)  # inherited method: unknown
    arguments = list(call.args) + [k.value for k in call.keywords]
    via_scaler = isinstance(call.func, ast.Attribute) and call.func.attr in ("step", "unscale_") and is_scaler(ctx, call.func.value)
    return any(dotted(arg) in objects for arg in arguments) and not via_scaler


def _callee_resets(ctx: FileContext, scope: Scope, call: ast.Call, callee: Scope, objects: set[str]) -> bool:
    """The callee may clear the gradients of an optimizer among ``objects``: its text resets
    gradients (a parameter named like a reset is only a flag, unless called), unless every reset is an ``x.zero_grad()`` whose owner, in the caller's names
    (call_events), is known to belong to other parameters."""
    text = (callee.ctx or ctx).text(callee.node)
    flags = set(parameters(callee))  # ``def optimizer_step(self, zero_grad=False)``: a flag's name resets nothing
    resets = [m for m in reset_mentions(text) if m.group(0) not in flags or text[m.end():].lstrip().startswith("(")]
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
