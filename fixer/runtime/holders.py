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
from typing import Any, Callable, Iterator

import torch

from fixer.runtime.sites import is_user_code

DEPTH = 4  # attribute/item steps below a visible name


@dataclass(frozen=True)
class Holder:
    name: str
    on_module: bool  # the last attribute on the way belongs to an nn.Module


def _visible() -> Iterator[tuple[str, Any]]:
    """(name, value) of the locals and globals of the user frames on the current stack."""
    seen_globals: set[int] = set()
    frame = sys._getframe(1)
    while frame is not None:
        if is_user_code(frame.f_code):
            yield from frame.f_locals.items()
            if id(frame.f_globals) not in seen_globals:
                seen_globals.add(id(frame.f_globals))
                yield from frame.f_globals.items()
        frame = frame.f_back


def _skipped(value: Any) -> bool:
    return inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value) or isinstance(value, (str, bytes, int, float))


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


def reachable() -> Iterator[tuple[str, bool, Any]]:
    """(path, through a module attribute, value), breadth-first, each object once."""
    seen: dict[int, Any] = {}
    queue = deque((name, False, value, 0) for name, value in _visible() if not name.startswith("__"))
    while queue:
        path, on_module, value, depth = queue.popleft()
        if _skipped(value) or id(value) in seen:
            continue
        seen[id(value)] = value
        yield path, on_module, value
        if depth < DEPTH:
            queue.extend((path + suffix, on_module or flag, child, depth + 1) for suffix, child, flag in _children(value))


def holders(wanted: Callable[[torch.Tensor], bool]) -> list[Holder]:
    return [Holder(path, on_module) for path, on_module, value in reachable() if isinstance(value, torch.Tensor) and wanted(value)]


def optimizers() -> list[Any]:
    return [value for _, _, value in reachable() if isinstance(value, torch.optim.Optimizer)]
