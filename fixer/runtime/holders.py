"""Who holds a value, found once after an error: the names the program can see at the failing
call (the locals and globals of its frames), followed through object attributes, module
buffers, lists, tuples and dicts. The path names the holder (``model.center``,
``agent.log_probs[3]``, ``state``); a path through an ``nn.Module`` attribute means a graph
cached on a module."""

from __future__ import annotations

import inspect
import sys
from collections import deque
from dataclasses import dataclass
from types import CodeType
from typing import Any, Callable, Iterator, Optional

import torch

from fixer.runtime.sites import is_user_code

DEPTH = 4  # attribute/item steps below a visible name


@dataclass(frozen=True)
class Holder:
    name: str
    on_module: bool  # an nn.Module's attribute is on the way
    code: Optional[CodeType] = None  # the function whose local (or module whose global) is the name's root


def _visible() -> Iterator[tuple[str, Any, CodeType]]:
    """(name, value, code) of the locals and globals of the user frames on the current stack;
    a global's code is the outermost frame seen with those globals (the module, when it runs)."""
    frames, frame = [], sys._getframe(1)
    while frame is not None:
        if is_user_code(frame.f_code):
            frames.append(frame)
        frame = frame.f_back
    module_code = {id(f.f_globals): f.f_code for f in frames}  # the outermost wins
    for f in frames:
        yield from ((k, v, f.f_code) for k, v in f.f_locals.items())
    for key, code in module_code.items():
        f = next(f for f in frames if id(f.f_globals) == key)
        yield from ((k, v, code) for k, v in f.f_globals.items())


_skipped_types: dict[type, bool] = {}


def _skipped(value: Any) -> bool:
    """Modules, classes, functions and plain scalars hold no graph (decided once per type)."""
    kind = type(value)
    skip = _skipped_types.get(kind)
    if skip is None:
        skip = _skipped_types[kind] = inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value) or isinstance(value, (str, bytes, int, float))
    return skip


def _children(value: Any) -> Iterator[tuple[str, Any, bool]]:
    """(suffix, child, through a module attribute)."""
    if isinstance(value, torch.Tensor):
        return
    if isinstance(value, torch.nn.Module):
        for table in (value._parameters, value._buffers, value._modules):
            yield from ((f".{k}", v, True) for k, v in table.items())
        yield from ((f".{k}", v, True) for k, v in vars(value).items() if not k.startswith("_"))
    elif isinstance(value, dict):
        yield from ((f"[{k!r}]", v, False) for k, v in value.items() if isinstance(k, (str, int)))
    elif isinstance(value, (list, tuple, deque)):
        yield from ((f"[{i}]", v, False) for i, v in enumerate(value))
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        yield from ((f".{k}", v, False) for k, v in vars(value).items() if not k.startswith("__"))


def _graphless(value: Any) -> bool:
    """Never a graph's holder: a parameter (a leaf) or an optimizer (its state is made under no_grad)."""
    return isinstance(value, (torch.nn.Parameter, torch.optim.Optimizer))


def reachable(graphs_only: bool = False, every_tensor_path: bool = False) -> Iterator[tuple[Holder, Any]]:
    """(holder, value), breadth-first, each object once (by its shortest path), or a tensor by
    every path (``for old in memory``: both ``old`` and ``memory[0]``); ``graphs_only`` passes over
    what cannot hold a graph (the leak sampler's cheap walk)."""
    seen: dict[int, Any] = {}
    queue = deque((name, False, code, value, 0) for name, value, code in _visible() if not name.startswith("__"))
    while queue:
        path, on_module, code, value, depth = queue.popleft()
        if _skipped(value) or (graphs_only and _graphless(value)):
            continue
        if id(value) in seen and not (every_tensor_path and isinstance(value, torch.Tensor)):
            continue
        seen[id(value)] = value
        yield Holder(path, on_module, code if "." not in path else None), value
        if depth < DEPTH:
            queue.extend((path + suffix, on_module or flag, code, child, depth + 1) for suffix, child, flag in _children(value))


def holders(wanted: Callable[[torch.Tensor], bool]) -> list[Holder]:
    """Every path to the wanted tensors, shortest first."""
    return [holder for holder, value in reachable(every_tensor_path=True) if isinstance(value, torch.Tensor) and wanted(value)]


def optimizers() -> list[Any]:
    return [value for _, value in reachable() if isinstance(value, torch.optim.Optimizer)]
