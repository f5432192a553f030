"""Repairs where a value with a graph is built (``built`` in a finding): the building statement
under ``torch.no_grad()``. The expert's repair when the graph reaches no parameter that an
optimizer steps (targets labelled by a fixed network, a rollout's stored outputs): the value is
data. Whether the graph reaches a stepped parameter is measured by the cut's probe
(fixer.runtime.repair.cuts), never guessed; a value built once, outside every loop, is the
usual shape, and its candidate is tried first (fixer.runtime.repair.expert)."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

from fixer.analysis.graph_reuse import innermost_loop
from fixer.context import FileContext
from fixer.edits.statements import insert_after, wrap_in
from fixer.runtime.report import Finding, Piece
from fixer.runtime.repair.candidate import Candidate, candidate, context, enclosing_function, statement_at
from fixer.runtime.repair.cuts import marked

def torch_name(ctx: FileContext) -> Optional[str]:
    """The name the file gives the ``torch`` module (``import torch``, ``import torch as th``)."""
    for node in ctx.tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "torch":
                    return alias.asname or "torch"
    return None


def outside_loops(ctx: FileContext, stmt: ast.stmt) -> bool:
    """No loop of its own function runs ``stmt`` more than once."""
    return innermost_loop(ctx, stmt, enclosing_function(ctx, stmt)) is None


def _targets(stmt: ast.stmt) -> list[ast.expr]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value is not None else []
    flat = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
    return flat if flat and all(isinstance(t, (ast.Name, ast.Attribute)) for t in flat) else []


def no_grad_at_build(finding: Finding, built: Piece) -> Iterator[Candidate]:
    ctx = context(built.filename)
    stmt = statement_at(ctx, built.line) if ctx is not None else None
    torch = torch_name(ctx) if stmt is not None else None
    targets = _targets(stmt) if torch is not None else []
    if not targets:
        return
    edit = wrap_in(ctx, stmt, f"with {torch}.no_grad()")
    if edit is None:
        return
    names = ", ".join(f"`{ctx.text(t)}`" for t in targets)
    probe = [insert_after(ctx, stmt, f"{ctx.text(t)} = {marked(ctx.text(t))}") for t in targets]
    found = candidate(f"build {names} under {torch}.no_grad() (line {built.line})", ctx, [edit], finding, probe)
    if found is not None:
        yield found
