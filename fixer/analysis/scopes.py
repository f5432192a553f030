"""Scopes (module body, functions, methods), loops, and where gradient recording is off."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional, Union

from fixer.analysis.names import is_torch, qualified
from fixer.context import FileContext

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
LoopNode = Union[ast.For, ast.AsyncFor, ast.While]
LOOPS = (ast.For, ast.AsyncFor, ast.While)
NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
NO_GRAD = ("torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad")


@dataclass(frozen=True)
class Scope:
    node: Union[ast.Module, FunctionNode]
    class_node: Optional[ast.ClassDef] = None  # set for methods

    @property
    def body(self) -> list[ast.stmt]:
        return self.node.body

    @property
    def is_method(self) -> bool:
        return self.class_node is not None

    @property
    def self_name(self) -> Optional[str]:
        """Name of the first parameter of a method (usually ``self``)."""
        if self.class_node is None or isinstance(self.node, ast.Module):
            return None
        args = self.node.args.posonlyargs + self.node.args.args
        return args[0].arg if args else None


def scopes(ctx: FileContext) -> list[Scope]:
    def compute() -> list[Scope]:
        found = [Scope(ctx.tree)]

        def visit(body: Iterable[ast.AST], cls: Optional[ast.ClassDef]) -> None:
            for node in body:
                for child in walk_local([node], include_root=True):
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        found.append(Scope(child, cls))
                        visit(child.body, None)
                    elif isinstance(child, ast.ClassDef):
                        visit(child.body, child)

        visit(ctx.tree.body, None)
        return found

    return ctx.memo("scopes", compute)


def walk_local(nodes: Iterable[ast.AST], include_root: bool = False) -> Iterator[ast.AST]:
    """Every node under ``nodes`` in source order, stopping at nested functions, classes and
    lambdas (which are yielded themselves but not entered)."""
    stack = list(reversed(list(nodes)))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, NESTED):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def scope_nodes(scope: Scope) -> Iterator[ast.AST]:
    """Nodes of the scope's own body (not nested scopes), in source order."""
    for node in walk_local(scope.body):
        if isinstance(node, NESTED):
            continue
        yield node


def enclosing_loops(ctx: FileContext, node: ast.AST, scope: Scope) -> list[LoopNode]:
    """Loops of ``scope`` that contain ``node``, innermost first."""
    loops: list[LoopNode] = []
    for parent in ctx.ancestors(node):
        if parent is scope.node:
            break
        if isinstance(parent, LOOPS) and not _in_loop_header(node, parent, ctx):
            loops.append(parent)
    return loops


def _in_loop_header(node: ast.AST, loop: LoopNode, ctx: FileContext) -> bool:
    """True if ``node`` is in the loop's target/iter/test (evaluated once or per iteration but not the body)."""
    header = [loop.test] if isinstance(loop, ast.While) else [loop.target, loop.iter]
    for part in header:
        if node is part or any(anc is part for anc in ctx.ancestors(node)):
            return True
    return False


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
