"""``optimizer.step(closure)`` (GF203's closures): the local function or method the step
evaluates, whether it backpropagates plainly (not through a wrapper that manages gradients), and
whether the optimizer is a torch one (SAM-style wrappers built elsewhere zero inside ``step``)."""

from __future__ import annotations

import ast
from typing import Optional

from fixer.analysis.calls import backward_calls, is_optimizer_construction
from fixer.analysis.names import dotted
from fixer.analysis.protocol import scope_for
from fixer.analysis.scopes import Scope, scopes, statement_index
from fixer.context import FileContext


def closure_of(ctx: FileContext, scope: Scope, step: ast.Call) -> Optional[Scope]:
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


def built_by_torch(ctx: FileContext, optimizer: str) -> bool:
    """Every assignment of ``optimizer`` in the file builds a torch optimizer (``torch.optim.LBFGS``)."""
    values = [a.value for a in statement_index(ctx).assigns if len(a.targets) == 1 and dotted(a.targets[0]) == optimizer]
    return bool(values) and all(is_optimizer_construction(ctx, value) for value in values)


def backpropagates_plainly(ctx: FileContext, closure: Scope) -> bool:
    """The closure calls ``loss.backward()`` (not through a wrapper that manages gradients)."""
    calls = backward_calls(ctx, closure)
    return any(c.kind in ("method", "autograd.backward", "scaler") for c in calls) and not any(c.kind == "owner" for c in calls)
