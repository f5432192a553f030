"""Run fixture programs in worker processes that import torch once, and measure what they leave.

A program runs as ``python NAME.py`` would: fresh ``__main__`` globals, its folder as cwd and
``sys.path[0]``, seeds reset, output captured. Its ``Result`` records the error it raised, the
final numbers it produced (``state``) and how many autograd nodes its globals keep alive
(``retained_nodes``, which exposes silent graph leaks such as ``total += loss``).
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import io
import math
import multiprocessing
import os
import random
import sys
import traceback
import types
import weakref
import warnings
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.pool import AsyncResult, Pool
from pathlib import Path
from typing import Any, Optional, Union

MAX_DEPTH = 4  # how far below a global name the walk looks
OUTPUT_TAIL = 4000  # characters of captured output kept in a result
AUTOGRAD_ERRORS = (
    "backward through the graph a second time",
    "modified by an inplace operation",
    "does not require grad",
)

State = dict[str, Optional[list[float]]]  # path -> flattened numbers; None for a missing .grad


@dataclass(frozen=True)
class Result:
    path: str
    error: Optional[tuple[str, str]]  # (exception type name, message)
    state: State
    retained_nodes: int
    output: str  # tail of captured stdout + stderr
    where: str = ""  # the program's own traceback lines, if it raised
    retained_saved: int = 0  # tensors saved for backward still alive at the end (retain_graph leaks)
    unpacked: int = 0  # saved tensors read back by backward passes: the backward work done


# --- worker side -------------------------------------------------------------------------


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)  # tiny programs, 2 workers on 2 cores: threads only add noise


def run_program(path: Union[str, Path]) -> Result:
    """Execute one program in this process and measure it; global torch state is restored."""
    import torch

    path = Path(path).resolve()
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": str(path), "__builtins__": builtins}
    _seed(torch)
    buffer = io.StringIO()
    error, where = None, ""
    saved: "weakref.WeakSet[_Saved]" = weakref.WeakSet()
    unpacked = [0]
    hooks = torch.autograd.graph.saved_tensors_hooks(
        lambda tensor: _Saved.holding(tensor, saved), lambda holder: holder.unpack(unpacked)
    )
    with _as_script(path.parent), contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer), hooks:
        try:
            exec(compile(path.read_bytes(), str(path), "exec"), namespace)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                error = ("SystemExit", str(exc.code))
        except Exception as exc:
            error, where = (type(exc).__name__, str(exc)), _program_frames(exc, path)
    _reset_torch(torch)
    try:
        state, nodes = _measure(namespace)
        alive = len(saved)  # measured while the program's globals still hold its graphs
    finally:
        namespace.clear()  # break cycles through the program's functions and classes
    return Result(str(path), error, state, nodes, buffer.getvalue()[-OUTPUT_TAIL:], where, alive, unpacked[0])


class _Saved:
    """Holds one tensor saved for backward, so a WeakSet can count the ones still alive: a graph
    freed by backward drops its holders, one kept by ``retain_graph=True`` does not. With saved
    tensor hooks installed torch skips its own check that a saved tensor was not modified in place
    (an optimizer step between forward and backward), so ``unpack`` makes it, with torch's message."""

    __slots__ = ("tensor", "version", "__weakref__")

    @staticmethod
    def holding(tensor: Any, alive: "weakref.WeakSet[_Saved]") -> "_Saved":
        holder = _Saved()
        holder.tensor, holder.version = tensor, tensor._version
        alive.add(holder)
        return holder

    def unpack(self, count: list[int]) -> Any:
        count[0] += 1
        if self.tensor._version != self.version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace operation: "
                f"[{self.tensor.type()} {list(self.tensor.shape)}] is at version {self.tensor._version}; "
                f"expected version {self.version} instead"
            )
        return self.tensor


def _seed(torch: types.ModuleType) -> None:
    torch.manual_seed(0)
    random.seed(0)
    with contextlib.suppress(ImportError):
        import numpy

        numpy.random.seed(0)


def _reset_torch(torch: types.ModuleType) -> None:
    torch.set_grad_enabled(True)
    torch.set_default_dtype(torch.float32)
    torch.autograd.set_detect_anomaly(False)


@contextlib.contextmanager
def _as_script(folder: Path) -> Iterator[None]:
    """cwd and sys.path[0] as for ``python folder/NAME.py``; warning filters restored after, and
    the program's own modules forgotten, so the next program imports its own ``helpers``."""
    cwd, saved_path = os.getcwd(), sys.path[:]
    os.chdir(folder)
    sys.path.insert(0, str(folder))
    try:
        with warnings.catch_warnings():
            yield
    finally:
        os.chdir(cwd)
        sys.path[:] = saved_path
        inside = str(folder.resolve()) + os.sep
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(inside):
                del sys.modules[name]


def _program_frames(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    return "".join(traceback.format_list(frames))


# --- measuring a finished program --------------------------------------------------------


def _measure(namespace: dict[str, Any]) -> tuple[State, int]:
    import torch

    state: State = {}
    tensors = []
    for path, depth, value in _reachable(namespace):
        if isinstance(value, torch.Tensor):
            tensors.append(value)
            if isinstance(value, torch.nn.Parameter) or (value.is_leaf and value.requires_grad):
                state[path] = _numbers(value)
                state[f"{path}.grad"] = None if value.grad is None else _numbers(value.grad)
            elif depth == 0 and value.dim() == 0:
                state[path] = _numbers(value)
        elif depth == 0 and _is_number(value):
            state[path] = [float(value)]
    return state, graph_nodes(tensors)


def _numbers(tensor: Any) -> list[float]:
    return tensor.detach().double().flatten().tolist()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def graph_nodes(tensors: Iterable[Any]) -> int:
    """Distinct autograd nodes reachable from the tensors' ``grad_fn``."""
    seen: dict[int, Any] = {}  # id -> node, holding the node so its id stays unique
    stack = [t.grad_fn for t in tensors]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(fn for fn, _ in node.next_functions)
    return len(seen)


def _reachable(namespace: dict[str, Any]) -> Iterator[tuple[str, int, Any]]:
    """(path, depth, value) breadth-first from the public globals, so a shared object gets its
    shortest path; every object except plain numbers is visited once."""
    seen: dict[int, Any] = {}
    queue = deque((name, 0, value) for name, value in namespace.items() if not name.startswith("_"))
    while queue:
        path, depth, value = queue.popleft()
        if _skipped(value) or (not _is_number(value) and id(value) in seen):
            continue
        seen[id(value)] = value
        yield path, depth, value
        if depth < MAX_DEPTH:
            queue.extend((child, depth + 1, item) for child, item in _children(path, value))


def _skipped(value: Any) -> bool:
    """Modules, classes, functions and text hold no numbers of the program's own."""
    return (
        inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value) or isinstance(value, (str, bytes))
    )


def _children(path: str, value: Any) -> Iterator[tuple[str, Any]]:
    import torch

    if isinstance(value, torch.Tensor):
        return
    if isinstance(value, torch.nn.Module):
        yield from ((f"{path}.{name}", p) for name, p in value.named_parameters())
        yield from ((f"{path}.{name}", m) for name, m in value.named_children())
        yield from _attributes(path, value)
    elif isinstance(value, dict):
        yield from ((f"{path}[{key!r}]", item) for key, item in value.items() if isinstance(key, (str, int)))
    elif isinstance(value, (list, tuple, deque)):
        yield from ((f"{path}[{i}]", item) for i, item in enumerate(value))
    elif hasattr(value, "__dict__"):
        yield from _attributes(path, value)


def _attributes(path: str, value: Any) -> Iterator[tuple[str, Any]]:
    return ((f"{path}.{name}", item) for name, item in vars(value).items() if not name.startswith("_"))


# --- comparing and describing results ----------------------------------------------------


def is_autograd_error(error: Optional[tuple[str, str]]) -> bool:
    return error is not None and error[0] == "RuntimeError" and any(m in error[1] for m in AUTOGRAD_ERRORS)


def compare_states(expected: State, actual: State, rel_tol: float = 1e-5, abs_tol: float = 1e-7) -> Optional[str]:
    """None if both states hold the same keys with close numbers, else the first difference."""
    missing, extra = sorted(expected.keys() - actual.keys()), sorted(actual.keys() - expected.keys())
    if missing or extra:
        return f"keys differ: missing {missing}, unexpected {extra}"
    for key, numbers in expected.items():
        difference = _compare_numbers(numbers, actual[key], rel_tol, abs_tol)
        if difference:
            return f"{key}: {difference}"
    return None


def _compare_numbers(
    expected: Optional[list[float]], actual: Optional[list[float]], rel_tol: float, abs_tol: float
) -> Optional[str]:
    if expected is None or actual is None:
        return None if expected is actual else f"expected {_count(expected)}, got {_count(actual)}"
    if len(expected) != len(actual):
        return f"expected {_count(expected)}, got {_count(actual)}"
    for i, (e, a) in enumerate(zip(expected, actual)):
        if not (math.isclose(e, a, rel_tol=rel_tol, abs_tol=abs_tol) or (math.isnan(e) and math.isnan(a))):
            return f"element {i} of {len(expected)}: expected {e!r}, got {a!r}"
    return None


def _count(numbers: Optional[list[float]]) -> str:
    return "None" if numbers is None else f"{len(numbers)} numbers"


def describe(result: Result, lines: int = 12) -> str:
    """The program, its error with the program's traceback lines, and its last output lines."""
    parts = [result.path]
    if result.error:
        parts.append(f"raised {result.error[0]}: {result.error[1]}")
        parts.append(result.where.rstrip())
    tail = result.output.splitlines()[-lines:]
    parts.append("last output lines:\n" + "\n".join(f"  | {line}" for line in tail) if tail else "no output")
    return "\n".join(part for part in parts if part)


# --- the pool ----------------------------------------------------------------------------


class Runner:
    """Worker processes that import torch once; one result per program path, computed once.

    ``submit`` queues programs ahead of time so both workers stay busy; ``run`` waits for one.
    A program that outlives ``timeout`` is reported as a TimeoutError and the pool restarted.
    """

    def __init__(self, workers: int = min(2, os.cpu_count() or 1), timeout: float = 60.0) -> None:
        self.workers, self.timeout = workers, timeout
        self._pool = self._start()
        self._jobs: dict[Path, Union[AsyncResult, Result]] = {}

    def _start(self) -> Pool:
        return multiprocessing.get_context("spawn").Pool(self.workers, initializer=_init_worker)

    def submit(self, paths: Iterable[Union[str, Path]]) -> None:
        for path in (Path(p).resolve() for p in paths):
            if path not in self._jobs:
                self._jobs[path] = self._pool.apply_async(run_program, (path,))

    def run(self, path: Union[str, Path], timeout: Optional[float] = None) -> Result:
        path = Path(path).resolve()
        self.submit([path])
        job = self._jobs[path]
        if isinstance(job, Result):
            return job
        seconds = timeout or self.timeout
        try:
            self._jobs[path] = job.get(seconds)
        except multiprocessing.TimeoutError:
            message = f"no result within {seconds:g} s (the program hangs or killed its worker)"
            self._jobs[path] = Result(str(path), ("TimeoutError", message), {}, 0, "")
            self._restart()
        return self._jobs[path]

    def _restart(self) -> None:
        self._pool.terminate()
        self._pool = self._start()
        pending = [p for p, job in self._jobs.items() if isinstance(job, AsyncResult) and not job.ready()]
        for path in pending:
            del self._jobs[path]
        self.submit(pending)

    def close(self) -> None:
        self._pool.terminate()  # queued programs nobody asked for are not worth waiting for
        self._pool.join()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
