"""Diagnosis of "one of the variables needed for gradient computation has been modified by an
inplace operation": the node whose saved tensor went stale, the parameter it saved, the
optimizer ``step()`` that changed that parameter after the node was built, and the backward
that still needed the old value (after a retained backward kept the graph alive)."""

from __future__ import annotations

import re
from typing import Optional

import torch

from fixer.runtime import graphwalk
from fixer.runtime.freed import classify, locate
from fixer.runtime.holders import reachable
from fixer.runtime.recorder import Call, Recorder
from fixer.runtime.report import Finding, Piece

NEAR = 3  # how far below the stale node a saved parameter is looked for (weight -> t() -> node)


def diagnose(recorder: Recorder, failing: Call, error: str) -> Optional[Finding]:
    located = locate(recorder, failing, graphwalk.is_stale, freeing_calls=False)
    if located is None:
        return None
    path, kept = located
    cause = classify(recorder, failing, path, kept, "graph kept by")
    stale = graphwalk.effective_record(path, len(path) - 1)
    if cause is None or stale is None:
        return None
    saved = Piece.at("saved by", stale.stack, recorder.iteration_of(stale.position) + 1)
    failed = Piece.at("needed by", failing.stack, failing.iteration + 1)
    kept_by = Piece.at("graph kept by", kept.stack, kept.iteration + 1)
    for param in _by_shape(graphwalk.parameters_below(path[-1], NEAR), error):
        step = _step_after(recorder, param, stale.position)
        if step is not None:
            changed = Piece.at("changed by", step.stack, step.iteration + 1)
            message = (
                f"parameter `{_name(param)}` {tuple(param.shape)}, saved at line {saved.line} for a graph kept by "
                f"retain_graph=True (line {kept_by.line}), was changed in place by the optimizer step at line "
                f"{changed.line} before the backward at line {failed.line} used it"
            )
            return Finding.at(cause.code, message, cause.where, error, [*cause.evidence, saved, changed])
    message = f"a tensor saved at line {saved.line} was modified in place before the backward at line {failed.line} used it"
    return Finding.at(cause.code, message, cause.where, error, [*cause.evidence, saved])


def _by_shape(params: list, error: str) -> list:
    """The parameters whose shape (or its transpose) is the one the error names come first."""
    match = re.search(r"\[torch\.\w+ \[([\d, ]*)\]\]", error)
    shape = tuple(int(n) for n in match.group(1).split(",") if n.strip()) if match else None
    return sorted(params, key=lambda p: tuple(p.shape) not in (shape, shape[::-1] if shape else None))


def _step_after(recorder: Recorder, param: torch.Tensor, position: int) -> Optional[Call]:
    entry = recorder.stepped.get(id(param))
    if entry is None or entry[0]() is not param:
        return None
    return next((call for call in entry[1] if call.position > position), None)


def _name(param: torch.Tensor) -> str:
    """The shortest name the program reaches the parameter by (``model.2.weight``)."""
    return next((holder.name for holder, value in reachable() if value is param), f"tensor {tuple(param.shape)}")
