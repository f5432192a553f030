"""The optimizer protocol, watched per parameter: which backward calls put the gradient that a
``step()`` consumes, and whether it was reset in between.

A parameter's gradient is followed without trusting any one way of clearing it: after each
backward, at each ``zero_grad()`` and before each step the ``.grad`` tensor and its version
counter are compared with the last look. A backward that adds exactly one version to the same
tensor accumulated onto what was there; anything else (``None``, a new tensor, another in-place
change) is a reset, unless, seen before a step, the tensor still holds non-zero values after an
in-place change (clipping, unscaling), which keeps the history. The parameters followed are the
optimizers' and modules' met at ``zero_grad()`` or ``step()``. Every backward's contribution carries the
number of steps the parameter had seen, its *window*.

- GF203: a step consumes a gradient holding contributions from two windows (a step consumed
  the first and nothing reset it since), for every parameter with a gradient.
- GF201: every step of the optimizer (two or more) follows a ``zero_grad()`` that wiped
  gradients no step had consumed (nor the program: a gradient it read since the last step,
  ``p.grad``, it manages itself, as PGD's backup and attack steps do), and then sees no gradient or only more of the same
  backward line's (accumulation over micro-batches zeroed each time).
- GF202: the first step came before any backward of the run and saw no gradient, and the same
  line stepped again after a backward filled the parameters (each step uses the gradient of
  the iteration before; a one-off step elsewhere, or a loop that skips its first step, is fine).
Zeroing inside a step (an LBFGS closure) is the step's own business and is not counted.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Optional

from fixer.runtime.fill_site import loop_line
from fixer.runtime.observer import Observer
from fixer.runtime.report import Finding, Piece, nth

CHAIN = 8  # contributions kept per gradient


@dataclass(eq=False)
class _Param:
    ref: Any
    grad: Any = None  # weakref to the .grad tensor last seen, or None
    version: int = -1
    chain: list = field(default_factory=list)  # (backward Call, window) accumulated since the last reset
    window: int = 0  # steps that included the parameter
    wiped: Optional[tuple] = None  # (zero_grad Call, backward sites) wiped unconsumed since the last step
    filled: bool = False  # a backward ever put a gradient in it
    fresh: bool = True  # first seen in this window holding a gradient of unknown origin
    read: bool = False  # the program read ``p.grad`` in this window: it manages the gradient itself (a backup, an attack)


@dataclass(eq=False)
class _Optimizer:
    steps: list = field(default_factory=list)  # judged steps: ("clean" or "wiped", saw no gradient)
    wipes: list = field(default_factory=list)  # zero_grad Calls that wiped unconsumed gradients
    wasted: list = field(default_factory=list)  # per judged step: (zero_grad, step, backward sites it wiped that this step did not use) or None
    first_before_backward: bool = False
    filled: bool = False  # a backward filled its parameters at some point
    first: Any = None  # the first step judged
    calls: list = field(default_factory=list)
    closure: bool = False  # a backward ran inside a step (LBFGS): the step computes its own gradient
    backwards_at_step: int = 0
    current: Any = None  # the step running
    stale: list = field(default_factory=list)  # steps that consumed a gradient an earlier step had consumed


class Protocol(Observer):
    def __init__(self, recorder: Any) -> None:
        super().__init__(recorder)
        self._params: dict[int, _Param] = {}
        self._optimizers: dict[int, tuple[Any, _Optimizer]] = {}
        self._of: dict[int, tuple[Any, list]] = {}  # id(optimizer) -> (weakref, its (state, parameter) pairs)
        self._backwards = 0  # backward calls so far (one inside a step means a closure)
        self._consumed_ever: set = set()  # backward sites whose gradient some step used
        self._read_after: set = set()  # backward sites after which the program read a gradient
        self._last_backward: Any = None

    # --- parameters -------------------------------------------------------------------------

    def _state(self, param: Any) -> _Param:
        state = self._params.get(id(param))
        if state is None or state.ref() is not param:
            state = self._params[id(param)] = _Param(weakref.ref(param), fresh=param.grad is not None)
            self._look(state, param)
        return state

    def _look(self, state: _Param, param: Any) -> None:
        grad = param.grad
        if grad is None:
            state.grad, state.version = None, -1
        else:
            if state.grad is None or state.grad() is not grad:
                state.grad = weakref.ref(grad)
            state.version = grad._version

    def _changed(self, state: _Param, param: Any) -> bool:
        grad = param.grad
        if grad is None:
            return state.grad is not None
        return state.grad is None or state.grad() is not grad or grad._version != state.version

    def _settle(self, state: _Param, param: Any) -> None:
        """Something other than a backward touched the gradient since the last look."""
        if self._changed(state, param):
            grad = param.grad
            kept = grad is not None and state.grad is not None and state.grad() is grad and bool(grad.any())
            if not kept:
                state.chain = []
            self._look(state, param)

    def _drop_dead(self) -> None:
        self._params = {key: state for key, state in self._params.items() if state.ref() is not None}

    def _states(self, optimizer: Any) -> list:
        """(state, parameter) of an optimizer's parameters, kept while its param_groups hold them."""
        params = _params_of(optimizer)
        cached = self._of.get(id(optimizer))
        if cached is None or len(cached[1]) != len(params) or any(p is not q for (_, p), q in zip(cached[1], params)):
            cached = self._of[id(optimizer)] = (weakref.ref(optimizer), [(self._state(p), p) for p in params])
        return cached[1]

    # --- events -----------------------------------------------------------------------------

    def before_backward(self, call: Any, tensors: tuple) -> None:
        self._backwards += 1  # a touch since the last look shows after it: two versions more, or a new tensor

    def after_backward(self, call: Any, tensors: tuple, result: Any, retain: bool, create: bool) -> None:
        self._last_backward = call.stack
        dead = False
        for state in self._params.values():  # (after every backward, for every parameter: kept lean)
            param = state.ref()
            if param is None:
                dead = True
                continue
            grad = param.grad
            if grad is None:
                if state.chain:
                    state.chain = []
                state.grad, state.version = None, -1
                continue
            same = state.grad is not None and state.grad() is grad
            if same and grad._version == state.version + 1:
                state.chain.append((call, state.window))
                state.filled = True
                if len(state.chain) > CHAIN:  # the oldest contribution and the latest tell all
                    del state.chain[1 : len(state.chain) - CHAIN + 1]
            elif not same or grad._version != state.version:
                state.chain = [(call, state.window)]  # a fresh gradient (or one we cannot follow)
                state.filled = True
            if not same:
                state.grad = weakref.ref(grad)
            state.version = grad._version
        if dead:
            self._drop_dead()

    def zero_grad(self, owner: Any, call: Any) -> None:
        params = _params_of(owner)
        for param in params:
            state = self._state(param)
            self._settle(state, param)
            if state.read:  # (PGD keeps a copy of the gradient, zeroes it for its attack steps, puts it back)
                continue
            sites = {c.stack for c, window in state.chain if window == state.window and c.frees and c.stack}  # lost for good
            if sites:
                before = state.wiped[1] if state.wiped else set()
                state.wiped = (call, before | sites)

    def grad_read(self, owner: Any, grad: Any) -> None:
        if self._last_backward is not None:
            self._read_after.add(self._last_backward)  # (an input's gradient, an attack's direction: that backward was used)
        state = self._params.get(id(owner))
        if state is not None and state.ref() is owner:
            state.read = True

    def before_step(self, optimizer: Any, call: Any) -> None:
        entry = self._optimizers.get(id(optimizer))
        if entry is None or entry[0]() is not optimizer:
            entry = self._optimizers[id(optimizer)] = (weakref.ref(optimizer), _Optimizer())
        opt = entry[1]
        states = self._states(optimizer)
        known = not any(state.fresh for state, _ in states)
        for state, param in states:
            self._settle(state, param)
        if known:
            self._judge(opt, states, call)
        for state, _ in states:
            state.window += 1
            state.wiped, state.fresh, state.read = None, False, False
        opt.backwards_at_step, opt.current = self._backwards, call

    def after_step(self, optimizer: Any, call: Any) -> None:
        entry = self._optimizers.get(id(optimizer))
        if entry is not None and self._backwards != entry[1].backwards_at_step:
            entry[1].closure = True
        if entry is not None and entry[1].closure:  # the closure's backward calls ran inside the step
            states = self._states(optimizer)
            self._stale(entry[1], states, entry[1].current)
            self._stale(entry[1], states, entry[1].current, inside=True)

    # --- judgements -------------------------------------------------------------------------

    def _judge(self, opt: _Optimizer, states: list, call: Any) -> None:
        with_grad = [(s, p) for s, p in states if p.grad is not None]
        empty = all(not s.chain and not bool(p.grad.any()) for s, p in with_grad)
        consumed = {id(c.stack): c.stack for s, _ in states for c, window in s.chain if window == s.window}  # (stacks are interned)
        wiped = [s.wiped for s, _ in states if s.wiped]
        wiped_sites = set().union(*(sites for _, sites in wiped)) if wiped else set()
        unconsumed = wiped_sites - set(consumed.values()) - self._read_after
        self._consumed_ever.update(consumed.values())
        opt.wasted.append((max((z for z, _ in wiped), key=lambda z: z.position), call, unconsumed) if unconsumed else None)
        if wiped_sites and (empty or wiped_sites.intersection(consumed.values())):
            consumed = set(consumed.values())
            zero = max((z for z, _ in wiped), key=lambda z: z.position)
            opt.wipes.append((zero, call, sorted(wiped_sites & consumed or wiped_sites, key=str)[0]))
            opt.steps.append(("wiped", empty))
        else:
            opt.steps.append(("clean", empty))
        opt.filled = opt.filled or bool(wiped_sites or consumed)
        if opt.first is None:
            opt.first = call
            opt.first_before_backward = not any(s.filled for s, _ in states)
        opt.calls.append(call)
        del opt.calls[2:-1]  # the first, the second and the latest
        self._stale(opt, states, call)

    def _stale(self, opt: _Optimizer, states: list, call: Any, inside: bool = False) -> None:
        """``inside``: judged after a step whose closure ran backward calls; two of them adding
        into one gradient is the same miss, repeated within the step."""
        chains = [s.chain for s, p in states if p.grad is not None and s.chain]
        if not chains or (opt.stale and opt.stale[-1] is call) or len(opt.stale) >= 2:
            return
        if inside:
            mixed = lambda s: sum(c.position >= call.position for c, _ in s.chain) >= 2  # noqa: E731
        else:
            mixed = lambda s: any(w < s.window for _, w in s.chain) and any(w == s.window for _, w in s.chain)  # noqa: E731
        if all(mixed(s) for s, p in states if p.grad is not None and s.chain):
            old = min((c for chain in chains for c in chain), key=lambda c: c[0].position)
            new = max((c for chain in chains for c in chain), key=lambda c: c[0].position)
            opt.stale.extend([call, call] if inside else [call])
            if len(opt.stale) < 2:  # reported at the second: a systematic miss, not a leftover
                return
            it = lambda c: c.iteration + 1  # noqa: E731
            first = Piece.at("accumulated by", old[0].stack, it(old[0]))
            again = Piece.at("accumulated again", new[0].stack, it(new[0]))
            stepped = at_loop("stepped", call)
            if first is None or stepped is None:  # not the user's code (a notebook cell's <stdin>): nothing to point at
                return
            message = (
                f"this step consumes a gradient that already went into an earlier step: the backward at line {first.line} "
                f"(the {nth(first.iteration)} iteration) and the one in the {nth(again.iteration)} add into the same .grad, "
                "which nothing reset in between: call zero_grad() once per step"
            )
            self.findings.append(Finding.at("GF203", message, stepped, "", [first, again, stepped]))

    def finish(self, whole_run: bool) -> list[Finding]:
        found = []
        for _, opt in self._optimizers.values():
            if len(opt.steps) < 2:
                continue
            again = [c for c in opt.calls[1:] if c.stack == opt.first.stack]
            if opt.first_before_backward and opt.steps[0][1] and opt.filled and again and not opt.closure:
                step = Piece.at("stepped", opt.first.stack, opt.first.iteration + 1)  # the step to move, where it is
                if step is None:
                    continue
                message = (
                    "this step runs before the backward of its iteration: its first run saw no gradient at all, and "
                    f"its {len(again)} later runs each used the gradient of an earlier iteration: call step() after backward()"
                )
                found.append(Finding.at("GF202", message, step, "", [step]))
            elif all(kind == "wiped" for kind, _ in opt.steps) and not opt.closure:  # a closure makes its own gradient
                zero, step, site = opt.wipes[-1]
                wipe = Piece.at("wiped by", zero.stack, zero.iteration + 1)  # the call to move, where it is
                filled = Piece("gradient from", site[0][0].co_filename, site[0][1], None, _text(site[0]))
                stepped = at_loop("stepped", step)
                if wipe is None:
                    continue
                message = (
                    f"every step ({len(opt.steps)}) comes after this zero_grad() wiped the gradient of the backward at line "
                    f"{filled.line} before any step used it: zero the gradients after the step (or before the backward)"
                )
                found.append(Finding.at("GF201", message, wipe, "", [filled, wipe, stepped]))
            elif opt.wasted and all(w is not None and not w[2] & self._consumed_ever for w in opt.wasted) and not opt.closure:
                found.extend(_wasted(opt.wasted[-1]))
        return found


def _wasted(last: tuple) -> list[Finding]:
    """Before every step a zero_grad wiped the gradient of a backward that no step of the run ever
    used (``a.backward(); opt.zero_grad(); b.backward(); opt.step()``): that backward is wasted."""
    zero, step, sites = last
    site = sorted(sites, key=str)[0]
    wipe = Piece.at("wiped by", zero.stack, zero.iteration + 1)
    filled = Piece("gradient from", site[0][0].co_filename, site[0][1], None, _text(site[0]))
    stepped = at_loop("stepped", step)
    if wipe is None:
        return []
    message = (
        f"before every step this zero_grad() wiped the gradient of the backward at line {filled.line}, which no step "
        "ever used: that backward is wasted; zero the gradients before it instead"
    )
    return [Finding.at("GF201", message, wipe, "", [filled, wipe, stepped])]


def _params_of(owner: Any) -> list:
    groups = getattr(owner, "param_groups", None)
    if groups is not None:
        return [p for group in groups for p in group["params"]]
    try:
        return list(owner.parameters())
    except Exception:  # an object whose parameters() we cannot call: nothing known
        return []


def at_loop(role: str, call: Any) -> Optional[Piece]:
    """The call seen in the innermost of its frames that runs it in a loop (``train_step(...)``
    in the training loop when the step is inside the helper), else its own line."""
    level = next((i for i, (code, line) in enumerate(call.stack) if loop_line(code, line) is not None), 0)
    return Piece.at(role, call.stack, call.iteration + 1, level)


def _text(frame: tuple) -> str:
    from fixer.runtime.sites import source_line

    return source_line(*frame)
