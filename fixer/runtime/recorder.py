"""Recording while the program runs: where each autograd node was built, and the calls that
mark the training loop (backward, autograd.grad, optimizer steps).

A ``TorchFunctionMode`` sees every torch call from Python; a result with a new ``grad_fn`` gets
``(position, user stack)`` in the node's own ``metadata`` dict, so the record lives and dies
with the node. ``position`` counts recorded nodes: comparing it with a call's position tells
whether a node was built before or after that call. Iterations are found without knowing the
loop: a backward or step call whose site already ran in the current iteration starts the next.
"""

from __future__ import annotations

import bisect
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch
import torch.optim.optimizer as optimizer_hooks
from torch.overrides import TorchFunctionMode

from fixer.runtime.library_calls import library_patches
from fixer.runtime.observer import Observer
from fixer.runtime.sites import Stack, caller_stack, forget_frames, is_user_code, user_stack
from fixer.runtime.stopping import StopRun, insist

try:  # our mode is pushed and popped at every library module call: the C calls, not their Python wrappers
    from torch._C import _get_function_stack_at, _len_torch_function_stack
    from torch._C import _pop_torch_function_stack as _pop_mode
    from torch._C import _push_on_torch_function_stack as _push_mode

    def _top_mode() -> Any:
        depth = _len_torch_function_stack()
        return _get_function_stack_at(depth - 1) if depth else None

except ImportError:  # a torch without them: the public spelling
    from torch.overrides import _get_current_function_mode as _top_mode  # noqa: F401

    def _push_mode(mode: Any) -> None:
        mode.__enter__()

    def _pop_mode() -> None:
        _top_mode().__exit__(None, None, None)


_GRAD = torch.Tensor.grad  # the descriptor whose reads reach our mode as ``_GRAD.__get__``
_MethodWrapper = type(_GRAD.__get__)  # (a type test first: most functions have no ``__self__``)
_Tensor, _getframe = torch.Tensor, sys._getframe  # (looked up once: they are used at every torch call)
KEY = "graphfix"  # the key of our record in grad_fn.metadata
KEEP_FIRST, KEEP_LAST = 64, 4096
HELD = 16  # freeing backward calls whose graph structure is kept to compare with a failing one, at most
HELD_ITERATIONS = 2  # ... and only those of the current and the previous iteration: a freed graph's
# nodes still cost memory (a transformer's: megabytes), and a diagnosis compares the failing graph
# with the backwards of its own iteration (a GAN's two players) or the one before (carried state)


@dataclass(eq=False)
class Call:
    kind: str  # "backward", "grad" or "step"
    stack: Stack
    position: int  # nodes recorded before the call
    iteration: int  # 0-based
    roots: tuple = ()  # weak references to the tensors backpropagated
    root_records: tuple = ()  # the records of their grad_fn at the call (a graph, not a tensor object)
    root_nodes: tuple = ()  # those grad_fn, held for the recent freeing calls (HELD, HELD_ITERATIONS)
    frees: bool = False  # the call frees the graph it walks (no retain_graph)
    optimizer: Optional[weakref.ref] = None


class NodeRecord:
    """One per recorded node, made for every op: slots make it quick to build and small."""

    __slots__ = ("position", "stack", "__weakref__")

    def __init__(self, position: int, stack: Stack) -> None:
        self.position = position
        self.stack = stack


class _Mode(TorchFunctionMode):
    def __init__(self, recorder: "Recorder") -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **kwargs) if kwargs else func(*args)
        recorder = self.recorder
        if isinstance(out, _Tensor):
            node = out.grad_fn
            if node is not None:
                meta = node.metadata
                if KEY not in meta:  # (the hottest path of graphfix run: Recorder.tag inline)
                    stack = user_stack(_getframe(1))
                    position = recorder.position
                    meta[KEY] = NodeRecord(position, stack)
                    recorder.last_seen[id(stack)] = position
                    recorder.position = position + 1
            elif type(func) is _MethodWrapper and func.__self__ is _GRAD:  # ``x.grad`` read by the program
                recorder.notify("grad_read", args[0], out)
        elif out is None:  # ``t[i] = value``: the target's new node (a CopySlices) is built here
            target = args[0] if args else None
            if isinstance(target, torch.Tensor) and target.grad_fn is not None:
                recorder.tag(target.grad_fn)
        elif isinstance(out, (tuple, list)):
            for item in out:
                if isinstance(item, torch.Tensor) and item.grad_fn is not None:
                    recorder.tag(item.grad_fn)
        if recorder.op_watchers:
            recorder.notify("op", func, args, kwargs, out, observers=recorder.op_watchers)
        return out


@dataclass(eq=False)
class Recorder:
    max_steps: Optional[int] = None
    on_error: Optional[Callable[[RuntimeError, Call], None]] = None
    position: int = 0
    steps: int = 0
    calls: list = field(default_factory=list)
    iteration_starts: list = field(default_factory=list)  # positions where iterations 1, 2, ... begin
    last_seen: dict = field(default_factory=dict)  # id(stack) -> position of the newest node built there (stacks are interned)
    stepped: dict = field(default_factory=dict)  # id(param) -> (weakref(param), [step calls])
    _current: set = field(default_factory=set)
    _last_call_position: int = 0
    _depth: int = 0
    _mode_on: bool = False
    _undo: list = field(default_factory=list)
    _held: list = field(default_factory=list)
    _listening: dict = field(default_factory=dict)  # event -> (number of observers, those that hear it)
    observers: list = field(default_factory=list)  # fixer.runtime.observer.Observer: the detectors
    op_watchers: list = field(default_factory=list)  # observers that want every torch call (while they ask)
    in_step: bool = False
    program_globals: Optional[dict] = None  # the program's globals once it ran to its end (graphfix run)
    failures: list = field(default_factory=list)  # the observers' own crashes, reported, never raised

    # --- recording --------------------------------------------------------------------------

    def tag(self, node: Any, stack: Optional[Stack] = None) -> None:
        meta = node.metadata
        if KEY not in meta:
            stack = user_stack(sys._getframe(2)) if stack is None else stack
            meta[KEY] = NodeRecord(self.position, stack)
            self.last_seen[id(stack)] = self.position
            self.position += 1

    # A library module (``nn.Linear``, ``nn.Sequential`` of them, a criterion) runs unrecorded: every
    # op inside it has the user stack of its call anyway, so only its outputs are tagged, at its
    # exit; an inner node takes the record of the nearest recorded node above it
    # (graphwalk.effective_record, inherited_records). A module of the user's code inside it is
    # recorded again. ``Module.__call__`` is wrapped rather than global module hooks installed:
    # those would send every module call, the library's inner ones too, down torch's slow path.

    def _call_switched(self, call: Callable, module: Any, args: tuple, kwargs: dict, user: bool) -> Any:
        """Run the module with recording on (``user``) or off, then back as it was, even if it raises."""
        was_on = self._mode_on
        self._watching(user)
        try:
            output = call(module, *args, **kwargs)
            if was_on and not self._mode_on and not self.in_step:  # (still off: reading grad_fn is not a torch call then)
                stack = None  # the caller's, found once an output needs it (a sample() has no graph)
                for tensor in (output,) if isinstance(output, torch.Tensor) else _tensors(output, 2):
                    node = tensor.grad_fn
                    if node is not None and KEY not in node.metadata:
                        stack = stack or user_stack(sys._getframe(2))
                        self.tag(node, stack)
            return output
        finally:
            if not self.in_step:
                self._watching(was_on)

    def record_call(self, kind: str, stack: Stack, **extra: Any) -> Call:
        forget_frames()
        key = (kind, id(stack))
        if key in self._current:  # this site already ran in this iteration: a new one begins
            self.iteration_starts.append(self._last_call_position)
            self._current = set()
        self._current.add(key)
        self._last_call_position = self.position
        call = Call(kind, stack, self.position, len(self.iteration_starts), **extra)
        self.calls.append(call)
        if len(self.calls) > KEEP_FIRST + 2 * KEEP_LAST:
            del self.calls[KEEP_FIRST : len(self.calls) - KEEP_LAST]
        return call

    def iteration_of(self, position: int) -> int:
        return bisect.bisect_right(self.iteration_starts, position)

    def around_backward(self, kind: str, roots: Any, frees: bool, run: Callable[[], Any], retain: Any = None, create: Any = False) -> Any:
        tensors = (roots,) if isinstance(roots, torch.Tensor) else tuple(roots or ())
        tensors = tuple(t for t in tensors if isinstance(t, torch.Tensor))
        with torch._C.DisableTorchFunction():  # our own look at the roots: not a torch call of the program
            nodes = tuple(n for t in tensors if (n := t.grad_fn) is not None)
        records = tuple(r for n in nodes if (r := n.metadata.get(KEY)) is not None)
        call = self.record_call(kind, caller_stack(2), roots=tuple(map(weakref.ref, tensors)), root_records=records, frees=frees)
        self._watching(True)  # a step that raised never ran its post hook
        if frees:  # kept to compare with a later failing graph, for a bounded time (HELD_ITERATIONS)
            call.root_nodes = nodes
            self._held.append(call)
            held = self._held
            while held and (len(held) > HELD or held[0].iteration <= call.iteration - HELD_ITERATIONS):
                held.pop(0).root_nodes = ()
        self.notify("before_backward", call, tensors)
        self._depth += 1
        try:
            result = run() if create or self.op_watchers else self._unrecorded(run)
            self.notify("after_backward", call, tensors, result, retain is True, bool(create))
            return result
        except RuntimeError as exc:
            if self.on_error is not None and not getattr(exc, "_graphfix_seen", False):
                exc._graphfix_seen = True
                self.on_error(exc, call)
            raise
        finally:
            self._depth -= 1

    def _unrecorded(self, run: Callable[[], Any]) -> Any:
        """A call that builds no graph (a backward without ``create_graph``, ``zero_grad()``):
        nothing in it to record, and the program's calls it makes need not pass through our mode."""
        was_on = self._mode_on
        self._watching(False)
        try:
            return run()
        finally:
            self._watching(was_on)

    def _before_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        call = self.record_call("step", caller_stack(2), optimizer=weakref.ref(optimizer))
        self.notify("before_step", optimizer, call)
        self.in_step = True
        self._watching(False)  # a step builds no graph: its many small ops need no recording

    def _watching(self, on: bool) -> None:
        """Push or pop our mode; a mode the program pushed on top of ours stays untouched (ours
        then stays on through the step: slower, never wrong)."""
        if on == self._mode_on:
            return
        if on:
            _push_mode(self._mode)
        elif _top_mode() is self._mode:
            _pop_mode()
        else:
            return
        self._mode_on = on

    def _after_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.in_step = False
        call = self.calls[-1] if self.calls and self.calls[-1].kind == "step" else None
        self.notify("after_step", optimizer, call)
        for group in optimizer.param_groups:  # (still unrecorded: p.grad is our look, not the program's)
            for param in group["params"]:
                if param.grad is not None and call is not None:
                    entry = self.stepped.setdefault(id(param), (weakref.ref(param), []))
                    entry[1].append(call)
                    del entry[1][:-4]
        self._watching(True)
        self.steps += 1
        if self.max_steps is not None and self.steps >= self.max_steps:
            if self.steps > self.max_steps:  # the program caught the first stop and went on
                insist()
            raise StopRun(self.steps)

    def notify(self, event: str, *args: Any, observers: Optional[list] = None) -> None:
        """Each observer hears the event with torch function handling off: its own look at
        tensors (``p.grad``, ``t.grad_fn``) is neither recorded nor slowed by our mode."""
        if observers is None:  # the observers that override the event, found once per event
            cached = self._listening.get(event)
            if cached is None or cached[0] != len(self.observers):  # (observers are added at start, dropped on a crash)
                cached = self._listening[event] = (len(self.observers), _overriding(self.observers, event))
            listening = cached[1]
        else:
            listening = _overriding(observers, event)
        if not listening:
            return
        with torch._C.DisableTorchFunction():
            for observer in listening:
                try:
                    getattr(observer, event)(*args)
                except Exception as bug:  # a detector's bug must not break the program it watches
                    self.failures.append(f"{type(observer).__name__}.{event}: {type(bug).__name__}: {bug}")
                    self.observers.remove(observer)
                    if observer in self.op_watchers:
                        self.op_watchers.remove(observer)

    # --- installing -------------------------------------------------------------------------

    def start(self) -> None:
        def entry(kind: str, original: Callable, first: str, retain_at: int) -> Callable:
            """``original`` recorded: its first parameter, named ``first`` (``outputs=`` may be a
            keyword), holds the roots; ``retain_graph`` and ``create_graph`` are the positional
            arguments ``retain_at`` and ``retain_at + 1`` after it."""

            def wrapper(*args, **kwargs):
                if self._depth:  # Tensor.backward calls torch.autograd.backward: record the outer call only
                    return original(*args, **kwargs)
                roots, rest = (args[0], args[1:]) if args else (kwargs.get(first), ())
                retain = kwargs.get("retain_graph", rest[retain_at] if len(rest) > retain_at else None)
                create = kwargs.get("create_graph", rest[retain_at + 1] if len(rest) > retain_at + 1 else False)
                frees = not (create if retain is None else retain)
                return self.around_backward(kind, roots, frees, lambda: original(*args, **kwargs), retain, create)

            return wrapper

        def zero_grad_of(original):
            def zero_grad(self_, *args, **kwargs):  # builds no graph: its attribute writes run unrecorded
                if self.observers and not self.in_step:
                    call = Call("zero_grad", caller_stack(1), self.position, len(self.iteration_starts))
                    self.notify("zero_grad", self_, call)
                return self._unrecorded(lambda: original(self_, *args, **kwargs))

            return zero_grad

        module_call, user_types = torch.nn.Module.__call__, {}

        def call_module(module, *args, **kwargs):
            kind = type(module)
            user = user_types.get(kind)
            if user is None:
                user = user_types[kind] = _user_forward(kind)
            # already as it should be; or a library module without submodules (a Linear, a ReLU, a
            # loss): its one or few torch calls cost less recorded, as the mode stands, than switched
            if user == self._mode_on or self.in_step or self.op_watchers or not (user or module._modules):
                return module_call(module, *args, **kwargs)
            return self._call_switched(module_call, module, args, kwargs, user)

        patches = (
            (torch.nn.Module, "__call__", call_module),
            (torch.Tensor, "backward", entry("backward", torch.Tensor.backward, "self", 1)),
            (torch.autograd, "backward", entry("backward", torch.autograd.backward, "tensors", 1)),
            (torch.autograd, "grad", entry("grad", torch.autograd.grad, "outputs", 2)),
            (torch.optim.Optimizer, "zero_grad", zero_grad_of(torch.optim.Optimizer.zero_grad)),
            (torch.nn.Module, "zero_grad", zero_grad_of(torch.nn.Module.zero_grad)),
            *library_patches(self),
        )
        for owner, name, value in patches:
            self._undo.append((owner, name, getattr(owner, name)))
            setattr(owner, name, value)
        self._handles = [
            optimizer_hooks.register_optimizer_step_pre_hook(self._before_step),
            optimizer_hooks.register_optimizer_step_post_hook(self._after_step),
        ]
        self._mode, self._mode_on = _Mode(self), False
        self._watching(True)

    def stop(self) -> None:
        forget_frames()
        if self._mode_on:
            self._mode.__exit__(None, None, None)  # the program's own modes were popped by its own exits
            self._mode_on = False
        for handle in self._handles:
            handle.remove()
        for owner, name, value in reversed(self._undo):
            setattr(owner, name, value)
        self._undo.clear()


def _user_forward(kind: type) -> bool:
    """A module class whose ``forward`` is the user's code, or has no Python code (a builtin, a
    scripted one): recorded."""
    code = getattr(getattr(kind, "forward", None), "__code__", None)
    return code is None or is_user_code(code)


def _tensors(value: Any, depth: int) -> list:
    """The tensors of a module's output: itself, or in a tuple, list or dict (LSTM's ``out, (h, c)``)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if depth == 0:
        return []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (tuple, list)) else ()
    return [t for item in items for t in _tensors(item, depth - 1)]


def _overriding(observers: list, event: str) -> list:
    return [o for o in observers if getattr(type(o), event) is not getattr(Observer, event)]
