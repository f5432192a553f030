"""Who holds a value, found once after an error: the names the program can see at the failing
call (the locals and globals of its frames), followed through object attributes, module
buffers, lists, tuples and dicts. The path names the holder (``model.center``,
``agent.log_probs[3]``, ``state``); a path through an ``nn.Module`` attribute means a graph
cached on a module."""

from __future__ import annotations

import sys
import types
from collections import deque
from dataclasses import dataclass
from types import CodeType
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

import torch

from fixer.runtime.sites import is_user_code, is_user_file

DEPTH = 4  # attribute/item steps below a visible name
WIDE = 32  # entries of a list or dict the leak sampler looks at


@dataclass(frozen=True)
class Holder:
    name: str
    on_module: bool  # an nn.Module's attribute is on the way
    code: Optional[CodeType] = None  # the function whose local (or module whose global) is the name's root
    bounded: bool = False  # held through a deque with a maxlen: a window, not a growing collection


def _visible(globals_first: bool = False) -> Iterator[tuple[str, Any, CodeType]]:
    """(name, value, code) of the locals and globals of the user frames on the current stack;
    a global's code is the outermost frame seen with those globals (the module, when it runs)."""
    frames, frame = [], sys._getframe(1)
    while frame is not None:
        if is_user_code(frame.f_code):
            frames.append(frame)
        frame = frame.f_back
    module_code = {id(f.f_globals): f.f_code for f in frames}  # the outermost wins

    def local_names():
        for f in frames:
            yield from ((k, v, f.f_code) for k, v in f.f_locals.items())

    def global_names():
        for key, code in module_code.items():
            f = next(f for f in frames if id(f.f_globals) == key)
            yield from ((k, v, code) for k, v in f.f_globals.items())

    yield from (global_names() if globals_first else local_names())
    yield from (local_names() if globals_first else global_names())


# What a value is, decided once per type (the walk asks for every object it meets):
SKIPPED, PARAMETER, OPTIMIZER, TENSOR, MODULE, MAPPING, SEQUENCE, OBJECT, LIBRARY_OBJECT, OPAQUE = range(10)
GRAPHLESS = (PARAMETER, OPTIMIZER)  # never a graph's holder: a leaf, or state made under no_grad
CONTAINERS = (OPTIMIZER, MODULE, MAPPING, SEQUENCE, OBJECT, LIBRARY_OBJECT)
_kinds: dict[type, int] = {}


def _kind(value: Any) -> int:
    kind = type(value)
    found = _kinds.get(kind)
    if found is None:
        found = _kinds[kind] = _classify(value)
    return found


# (decided from the type alone: ``inspect.ismodule(value)`` and its kin look up ``value.__class__``,
# which a deprecated alias answers with a warning the program itself never triggers)
UNHELD_TYPES = (
    types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
    types.MethodWrapperType, types.WrapperDescriptorType, types.MethodDescriptorType,
    types.ClassMethodDescriptorType, str, bytes, int, float,
)


def _is_descriptor_type(kind: type) -> bool:
    """A method descriptor (``inspect.ismethoddescriptor``'s test, asked of the type)."""
    return hasattr(kind, "__get__") and not hasattr(kind, "__set__")


def _classify(value: Any) -> int:
    """Modules, classes, functions and plain scalars hold no graph; nor does a parameter (a leaf)
    or an optimizer (its state is made under no_grad)."""
    kind = type(value)
    if issubclass(kind, UNHELD_TYPES) or _is_descriptor_type(kind):
        return SKIPPED
    if issubclass(kind, torch.nn.Parameter):
        return PARAMETER
    if issubclass(kind, torch.optim.Optimizer):
        return OPTIMIZER
    if issubclass(kind, torch.Tensor):
        return TENSOR
    if issubclass(kind, torch.nn.Module):
        return MODULE
    if issubclass(kind, dict):
        return MAPPING
    if issubclass(kind, (list, tuple, deque)):
        return SEQUENCE
    if not hasattr(value, "__dict__"):
        return OPAQUE
    filename = getattr(sys.modules.get(kind.__module__), "__file__", None)
    user = is_user_file(filename) if filename else kind.__module__ == "__main__"  # (a notebook's classes: no file)
    return OBJECT if user else LIBRARY_OBJECT


def _items(value: Any, kind: int, graphs_only: bool) -> Iterable[tuple[str, Any, bool]]:
    """(suffix, child, through a module attribute) of a container."""
    if kind == MODULE:
        tables = (value._buffers, value._modules) if graphs_only else (value._parameters, value._buffers, value._modules)
        for table in tables:
            yield from ((f".{k}", v, True) for k, v in table.items())
        yield from ((f".{k}", v, True) for k, v in vars(value).items() if not k.startswith("_"))
    elif kind == MAPPING:
        entries = _spread(list(value.items())) if graphs_only else value.items()
        yield from ((f"[{k!r}]", v, False) for k, v in entries if isinstance(k, (str, int)))
    elif kind == SEQUENCE and graphs_only:
        yield from ((f"[{i}]", value[i], False) for i in _spread(range(len(value))))
    elif kind == SEQUENCE:
        yield from ((f"[{i}]", v, False) for i, v in enumerate(value))  # (a deque indexed in turn: quadratic)
    elif kind == OBJECT:
        yield from ((f".{k}", v, False) for k, v in vars(value).items() if not k.startswith("__"))
    else:  # an object of a library's class (an optimizer, a parser, a metric): its public attributes
        yield from ((f".{k}", v, False) for k, v in vars(value).items() if not k.startswith("_"))


def _spread(entries: Sequence) -> Sequence:
    """At most WIDE entries, evenly spaced, the first and the last among them: a long list or
    dict filled step by step still shows entries of every age (a holder's growth), at a bounded cost."""
    if len(entries) <= WIDE:
        return entries
    last = len(entries) - 1
    return [entries[round(i * last / (WIDE - 1))] for i in range(WIDE)]


def _walk(graphs_only: bool, every_tensor_path: bool, roots: Optional[Iterable] = None) -> Iterator[tuple[str, bool, Optional[CodeType], Any, int, bool]]:
    """(path, through a module attribute, root's code, value, kind, through a bounded deque), breadth-first from
    ``roots`` ((name, value, code); the visible names by default); what holds no graph is
    dropped before its path is even spelled."""
    dropped = (SKIPPED, *GRAPHLESS) if graphs_only else (SKIPPED,)
    tensors = (TENSOR, PARAMETER) if every_tensor_path else ()
    seen: dict[int, Any] = {}
    queue = deque()
    # the sampler names a holder by its longest-lived name (a global outlives the step function's
    # parameter aliasing it, and the look at the program's end sees only globals)
    for name, value, code in _visible(globals_first=graphs_only) if roots is None else roots:
        kind = _kind(value)
        if kind not in dropped and not name.startswith("__"):
            queue.append((name, False, code, value, kind, 0, False))
    while queue:
        path, on_module, code, value, kind, depth, bounded = queue.popleft()
        if id(value) in seen and kind not in tensors:
            continue
        seen[id(value)] = value
        yield path, on_module, code, value, kind, bounded
        if depth < DEPTH and kind in CONTAINERS:
            bounded = bounded or getattr(value, "maxlen", None) is not None and isinstance(value, deque)
            for suffix, child, flag in _items(value, kind, graphs_only):
                child_kind = _kind(child)
                if child_kind not in dropped:
                    queue.append((path + suffix, on_module or flag, code, child, child_kind, depth + 1, bounded))


def _holder(path: str, on_module: bool, code: Optional[CodeType], bounded: bool = False) -> Holder:
    return Holder(path, on_module, code if "." not in path else None, bounded)


def reachable(every_tensor_path: bool = False) -> Iterator[tuple[Holder, Any]]:
    """(holder, value), breadth-first, each object once (by its shortest path), or a tensor by
    every path (``for old in memory``: both ``old`` and ``memory[0]``)."""
    for path, on_module, code, value, _, _ in _walk(False, every_tensor_path):
        yield _holder(path, on_module, code), value


def graph_holders(roots: Optional[Iterable] = None) -> list[tuple[Holder, torch.Tensor, Optional[CodeType]]]:
    """(holder, tensor, the code whose local or global the path starts from) of each tensor with
    a graph, by every path (``loss`` and ``model.losses[-1]``: each holds it): the leak sampler's
    cheap walk, which passes over what cannot hold a graph."""
    return [
        (_holder(path, on_module, code, bounded), value, code)
        for path, on_module, code, value, kind, bounded in _walk(True, True, roots)
        if kind == TENSOR and value.grad_fn is not None
    ]


def holders(wanted: Callable[[torch.Tensor], bool]) -> list[Holder]:
    """Every path to the wanted tensors, shortest first."""
    return [holder for holder, value in reachable(every_tensor_path=True) if isinstance(value, torch.Tensor) and wanted(value)]


def optimizers() -> list[Any]:
    return [value for _, value in reachable() if isinstance(value, torch.optim.Optimizer)]
