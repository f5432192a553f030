"""Where gradient recording is off: inside ``with torch.no_grad():`` (or ``inference_mode``,
``set_grad_enabled(False)``), or in a function decorated with one of them."""

from __future__ import annotations

import ast

from fixer.analysis.names import is_torch, qualified
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
