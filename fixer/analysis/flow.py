"""Where a graph flows inside an expression.

``flowing_nodes`` yields the sub-expressions a graph flows through: not under ``.detach()``,
``.item()``, ``.data``, nor into nested functions. A call to a function the analysis can read
(a module-level function of this file, or one imported from another file of the project) passes
on only the arguments whose parameters its return values derive from: ``loss_of(fake)`` with
``return D(fake.detach()).mean()`` carries nothing of ``fake``. Any other call passes on all of
its arguments (we cannot see what it does with them)."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.graph import DETACHING_ATTRIBUTES, DETACHING_METHODS, PLAIN_BUILTINS, GraphFacts, facts
from fixer.analysis.imported_definitions import imported_function
from fixer.analysis.names import dotted
from fixer.analysis.no_grad import under_no_grad
from fixer.analysis.scopes import NESTED, Scope, is_self_attribute, scopes
from fixer.context import FileContext
from fixer.nodes import child_nodes, walk

# grad-free ops (zero or no derivative): a value passing through them carries no usable graph
ZERO_GRADIENT_METHODS = frozenset({"sign", "round", "floor", "ceil", "trunc", "bool", "long", "int"})


def reaching(graph: GraphFacts, name: str, at: ast.AST) -> list[tuple[ast.AST, Optional[ast.expr]]]:
    """``graph.reaching`` that treats a name bound by ``with ... as name`` as unknown (no answer):
    ``ast.withitem`` has no position, which GraphFacts.reaching needs."""
    if any(not hasattr(stmt, "lineno") for stmt, _ in graph.assignments.get(name, [])):
        return []
    return graph.reaching(name, at)


def flowing_nodes(ctx: FileContext, expr: ast.expr, names: bool = True, objects: frozenset[str] = frozenset()) -> Iterator[ast.AST]:
    """Sub-expressions of ``expr`` through which a graph flows. Names are yielded but not entered.
    ``objects``: names known to hold an object of a class, whose ``.data`` is a field, as ``self``'s."""
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, NESTED):
            continue
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and (node.func.attr in DETACHING_METHODS or node.func.attr in ZERO_GRADIENT_METHODS):
                continue
            if isinstance(node.func, ast.Name) and node.func.id in PLAIN_BUILTINS - {"zip", "enumerate"}:
                continue
            yield node  # the callee is not data: follow the receiver of a method, not the function name
            callee = [node.func.value] if isinstance(node.func, ast.Attribute) else [] if isinstance(node.func, ast.Name) else [node.func]
            stack.extend(reversed([*callee, *flowing_arguments(ctx, node)]))
            continue
        if isinstance(node, ast.Attribute) and node.attr in DETACHING_ATTRIBUTES and not is_self_attribute(ctx, node) and not (
            isinstance(node.value, ast.Name) and node.value.id in objects
        ):
            continue
        if isinstance(node, (ast.Name, ast.Attribute)) and dotted(node) is not None:
            if names:
                yield node
            continue
        yield node
        stack.extend(reversed(list(child_nodes(node))))


def module_functions(ctx: FileContext) -> dict[str, Scope]:
    """Module-level functions of the file by name (only names defined once)."""

    def compute() -> dict[str, Scope]:
        found: dict[str, list[Scope]] = {}
        for scope in scopes(ctx):
            if isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)) and scope.class_node is None:
                if ctx.parent(scope.node) is ctx.tree:
                    found.setdefault(scope.node.name, []).append(scope)
        return {name: defs[0] for name, defs in found.items() if len(defs) == 1}

    return ctx.memo("shared_graph_functions", compute)


def root_names(ctx: FileContext, graph: GraphFacts, expr: ast.expr, at: ast.AST, seen: Optional[set] = None) -> set[str]:
    """Names (parameters included) that ``expr`` derives from through graph-carrying flow."""
    seen = seen if seen is not None else set()
    names: set[str] = set()
    for node in flowing_nodes(ctx, expr):
        name = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if name is None or (name, id(at)) in seen:
            continue
        seen.add((name, id(at)))
        names.add(name.split(".")[0])
        for stmt, value in reaching(graph, name, at):
            if value is not None:
                names |= root_names(ctx, graph, value, stmt, seen)
    return names


def flowing_arguments(ctx: FileContext, call: ast.Call) -> list[ast.AST]:
    """The arguments (expressions, or ``ast.keyword``s) whose values may reach what the call
    returns: all of them, unless it runs a readable project function whose returns provably read
    only some of its parameters."""

    def compute() -> list[ast.AST]:
        everything = [*call.args, *call.keywords]
        helper = _readable_function(ctx, call)
        if helper is None or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return everything
        params = flowing_parameters(helper.ctx or ctx, helper)
        if params is None:
            return everything
        positional = [a.arg for a in helper.node.args.posonlyargs + helper.node.args.args]
        kept = [a for i, a in enumerate(call.args) if i >= len(positional) or positional[i] in params]
        return kept + [k for k in call.keywords if k.arg in params]

    return ctx.memo(("flowing_arguments", id(call)), compute)


def named_function(ctx: FileContext, call: ast.Call) -> Optional[Scope]:
    """The function of this file or of an imported project module that a call by plain name runs."""
    if not isinstance(call.func, ast.Name):
        return None
    return module_functions(ctx).get(call.func.id) or imported_function(ctx, call.func)


def _readable_function(ctx: FileContext, call: ast.Call) -> Optional[Scope]:
    helper = named_function(ctx, call)
    if helper is None or helper.node.args.vararg or helper.node.args.kwarg:
        return None
    return helper


def flowing_parameters(ctx: FileContext, helper: Scope) -> Optional[frozenset[str]]:
    """The parameters a function's returned values derive from through graph-carrying flow; None
    while it is being computed (a recursive call: every argument flows)."""
    computing = ("flowing_parameters: computing", id(helper.node))
    if computing in ctx.cache:
        return None

    def compute() -> frozenset[str]:
        ctx.cache[computing] = True
        try:
            graph = facts(ctx, helper)
            args = helper.node.args
            params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
            found: set[str] = set()
            for node in walk(helper.node):
                if isinstance(node, ast.Return) and node.value is not None and own_return(ctx, node, helper) and not under_no_grad(ctx, node):
                    found |= root_names(ctx, graph, node.value, node) & params
            return frozenset(found)
        finally:
            del ctx.cache[computing]

    return ctx.memo(("flowing_parameters", id(helper.node)), compute)  # (a project file's memo records what it read)


def own_return(ctx: FileContext, node: ast.Return, helper: Scope) -> bool:
    for parent in ctx.ancestors(node):
        if parent is helper.node:
            return True
        if isinstance(parent, NESTED):
            return False
    return False
