"""Advanced indexing: a subscript whose index is a tensor (``x[idx]``), a list (``x[[1, 2]]``) or
a boolean mask (``x[x > 0]``) saves its index for backward, which the first backward frees (a
slice or an integer saves nothing). The index is known to be a tensor when a torch function makes
it there (``x[torch.randperm(n)[:k]]``) or every binding of the name it reads does
(``idx = torch.randint(...)`` ... ``x[idx]``)."""

from __future__ import annotations

import ast

from fixer.analysis.graph import GraphFacts
from fixer.analysis.names import qualified
from fixer.context import FileContext


def indexes_by_tensor(ctx: FileContext, graph: GraphFacts, node: ast.Subscript) -> bool:
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    for part in parts:
        inner = part.value if isinstance(part, ast.Subscript) else part
        if isinstance(inner, (ast.Compare, ast.List)):
            return True
        if isinstance(inner, ast.Call) and _torch_call(ctx, inner):
            return True
        if isinstance(inner, ast.Name):
            defs = graph.reaching(inner.id, node)
            if defs and all(isinstance(v, ast.Call) and _torch_call(ctx, v) for _, v in defs):
                return True
    return False


def _torch_call(ctx: FileContext, call: ast.Call) -> bool:
    return (qualified(ctx, call.func) or "").startswith("torch.")
