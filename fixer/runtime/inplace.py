"""Diagnosis of "one of the variables needed for gradient computation has been modified by an
inplace operation": the node whose saved tensor went stale, the parameter it saved, the
optimizer ``step()`` that changed that parameter after the node was built, and the backward
that still needed the old value (after a retained backward kept the graph alive)."""

from __future__ import annotations

import gc
from typing import Any, Optional

import torch

from fixer.runtime import graphwalk
from fixer.runtime.recorder import Call, Recorder
from fixer.runtime.report import Finding, Piece

NEAR = 3  # how far below the stale node a saved parameter is looked for (weight -> t() -> node)


def diagnose(recorder: Recorder, failing: Call, error: str) -> Optional[Finding]:
    roots = [t.grad_fn for ref in failing.roots if (t := ref()) is not None and t.grad_fn is not None]
    path = graphwalk.path_to(roots, lambda node, _: graphwalk.is_stale(node))
    if not path:
        return None
    stale = graphwalk.effective_record(path, len(path) - 1)
    if stale is None:
        return None
    iteration = lambda position: recorder.iteration_of(position) + 1  # noqa: E731
    built = Piece.at("saved by", stale.stack, iteration(stale.position))
    failed = Piece.at("needed by", failing.stack, failing.iteration + 1)
    retained = next((c for c in reversed(recorder.calls) if c.kind != "step" and not c.frees and stale.position < c.position < failing.position), None)
    kept = Piece.at("graph kept by", retained.stack, retained.iteration + 1) if retained else None
    for param in _parameters_near(path[-1]):
        step = _step_after(recorder, param, stale.position)
        if step is None:
            continue
        changed = Piece.at("changed by", step.stack, step.iteration + 1)
        message = (
            f"parameter `{_name(param)}` {tuple(param.shape)} saved here for backward was changed in place by "
            f"the optimizer step at line {changed.line} before the backward at line {failed.line} used it"
        )
        return Finding.at(_code(kept), message, built, error, [built, kept, changed, failed])
    message = f"a tensor saved here for backward was modified in place before the backward at line {failed.line} used it"
    return Finding.at(_code(kept), message, built, error, [built, kept, failed])


def _code(kept: Optional[Piece]) -> str:
    """A retained graph walked again after a step: the repeated backward's rule (GF106)."""
    return "GF106" if kept else "GF202"


def _parameters_near(node: Any) -> list:
    found, frontier = [], [node]
    for _ in range(NEAR):
        nxt = []
        for current in frontier:
            for child, _ in current.next_functions:
                if child is None:
                    continue
                if hasattr(child, "variable"):
                    found.append(child.variable)
                else:
                    nxt.append(child)
        frontier = nxt
    return found


def _step_after(recorder: Recorder, param: torch.Tensor, position: int) -> Optional[Call]:
    entry = recorder.stepped.get(id(param))
    if entry is None or entry[0]() is not param:
        return None
    return next((call for call in entry[1] if call.position > position), None)


def _name(param: torch.Tensor) -> str:
    """``Model.layer.weight`` from the outermost module that owns the parameter."""
    best = ""
    for obj in gc.get_objects():
        if isinstance(obj, torch.nn.Module):
            for name, p in obj.named_parameters():
                if p is param and (not best or name.count(".") > best.count(".")):
                    best = f"{type(obj).__name__}.{name}"
    return best or f"tensor {tuple(param.shape)}"
