"""Where gradient recording is off: inside ``with torch.no_grad():`` (or ``inference_mode``,
``set_grad_enabled(False)``), or in a function decorated with one of them; and where a module's
method runs only in evaluation mode (``if not self.training:``)."""

from __future__ import annotations

import ast

from fixer.analysis.names import dotted, is_torch, qualified
from fixer.context import FileContext

NO_GRAD = ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad")


def is_no_grad_context(ctx: FileContext, expr: ast.expr) -> bool:
    """``torch.no_grad()``, ``torch.inference_mode()``, ``torch.set_grad_enabled(False)``."""
    if not isinstance(expr, ast.Call):
        return False
    if is_torch(ctx, expr.func, *NO_GRAD):
        return not (expr.args and isinstance(expr.args[0], ast.Constant) and expr.args[0].value is False)
    if is_torch(ctx, expr.func, "torch.set_grad_enabled", "torch.autograd.set_grad_enabled"):
        return bool(expr.args) and isinstance(expr.args[0], ast.Constant) and expr.args[0].value is False
    return False


def under_no_grad(ctx: FileContext, node: ast.AST) -> bool:
    """True if ``node`` runs with gradient recording off: inside ``with torch.no_grad():`` (or
    inference_mode / set_grad_enabled(False)) or in a function decorated with one of them."""
    for parent in ctx.ancestors(node):
        if isinstance(parent, (ast.With, ast.AsyncWith)):
            if any(is_no_grad_context(ctx, item.context_expr) for item in parent.items):
                return True
        elif isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in parent.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if qualified(ctx, target) in NO_GRAD:
                    return True
            return False
        elif isinstance(parent, (ast.ClassDef, ast.Lambda)):
            return False
    return False


def eval_only(ctx: FileContext, node: ast.AST, method) -> bool:
    """Under ``if not self.training:`` (or the ``else`` of ``if self.training:``) within ``method``
    (a scope with ``self_name``): code a module runs only in evaluation mode."""
    tested = f"{method.self_name}.training"
    child = node
    for parent in ctx.ancestors(node):
        if parent is method.node:
            return False
        if isinstance(parent, ast.If):
            negated = isinstance(parent.test, ast.UnaryOp) and isinstance(parent.test.op, ast.Not)
            flag = parent.test.operand if negated else parent.test
            # only the flag itself decides the branch (``if self.training and cached:`` does not)
            if dotted(flag) == tested and negated == any(child is s for s in parent.body):
                return True
        child = parent
    return False
