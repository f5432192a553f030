"""torch.distributions' methods run unrecorded, as a library module does (fixer.runtime.recorder):
a policy's ``Categorical(probs)``, ``sample()`` and ``log_prob(action)`` make dozens of small
torch calls (argument checks, broadcasting, gathers) that a loop of many tiny steps (an
actor-critic's environment steps) would otherwise pay our mode for, one by one. Their results
(and the tensors a constructor stores on the distribution) are tagged with the caller's stack
when the call returns; a node built inside takes the record of the nearest recorded node above
it, as inside any library module."""

from __future__ import annotations

from typing import Any, Callable

import torch

METHODS = ("__init__", "log_prob", "sample", "rsample", "entropy", "cdf", "icdf", "expand")


def _distribution_classes() -> list[type]:
    base = torch.distributions.Distribution
    found, todo = [], [base]
    while todo:
        kind = todo.pop()
        if kind not in found and kind.__module__.startswith("torch.distributions"):
            found.append(kind)
            todo.extend(kind.__subclasses__())
    return found


def library_patches(recorder: Any) -> list[tuple[type, str, Callable]]:
    """(owner, name, replacement) for each torch.distributions method to run unrecorded."""

    def unrecorded(original: Callable, constructor: bool) -> Callable:
        def init_and_stored(instance, *args, **kwargs):  # what the constructor stored: tagged like an output
            original(instance, *args, **kwargs)
            return [value for value in vars(instance).values() if isinstance(value, torch.Tensor)]

        call = init_and_stored if constructor else original

        def method(instance, *args, **kwargs):
            if not recorder._mode_on or recorder.in_step or recorder.op_watchers:  # nothing to switch
                return original(instance, *args, **kwargs)
            output = recorder._call_switched(call, instance, args, kwargs, False)
            return None if constructor else output

        method.__wrapped__ = original
        return method

    patches = []
    for kind in _distribution_classes():
        for name in METHODS:
            original = kind.__dict__.get(name)
            if callable(original) and getattr(original, "__code__", None) is not None:
                patches.append((kind, name, unrecorded(original, name == "__init__")))
    return patches
