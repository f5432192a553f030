"""Values a caller's loop hands to every call of a function (fixer/analysis/threaded.py)."""

from __future__ import annotations

import textwrap

import pytest

from fixer.analysis.scopes import scopes
from fixer.analysis.threaded import argument_values, persistent_argument, threaded_parameter
from fixer.context import FileContext


def function(source: str, name: str = "step"):
    ctx = FileContext("t.py", textwrap.dedent(source))
    return ctx, next(s for s in scopes(ctx) if getattr(s.node, "name", None) == name)


THREADED = """
def step(x, total):
    total += x
    return {returned}

total = 0.0
for x in data:
    {call}
"""


@pytest.mark.parametrize(
    "returned, call",
    [("total", "total = step(x, total)"), ("(x, total)", "x2, total = step(x, total)"), ("x, total", "_, total = step(x, total=total)")],
)
def test_a_total_bound_back_in_a_loop_is_threaded(returned: str, call: str) -> None:
    ctx, scope = function(THREADED.format(returned=returned, call=call))
    assert threaded_parameter(ctx, scope, "total")


@pytest.mark.parametrize(
    "returned, call, why",
    [
        ("total", "other = step(x, total)", "bound to another name"),
        ("(total, x)", "x2, total = step(x, total)", "the returned slot is not the one bound back"),
        ("total", "total = step(x, total); total = 0.0", "reset in the loop"),
        ("total * 2", "total = step(x, total)", "returns a new value"),
    ],
)
def test_a_total_not_handed_back_is_not_threaded(returned: str, call: str, why: str) -> None:
    ctx, scope = function(THREADED.format(returned=returned, call=call))
    assert not threaded_parameter(ctx, scope, "total"), why


def test_a_call_outside_a_loop_does_not_thread() -> None:
    ctx, scope = function("""
    def step(x, total):
        total += x
        return total

    total = step(1, 0.0)
    """)
    assert not threaded_parameter(ctx, scope, "total")


PERSISTENT = """
def step(x, losses):
    {body}
    losses.append(x)

{setup}
for x in data:
    {loop}
    step(x, losses)
"""


def test_a_list_the_loop_keeps_is_persistent() -> None:
    ctx, scope = function(PERSISTENT.format(body="pass", setup="losses = []", loop="pass"))
    assert persistent_argument(ctx, scope, "losses")


@pytest.mark.parametrize(
    "body, loop, why",
    [("losses = []", "pass", "the function makes its own list"), ("pass", "losses = []", "a fresh list every iteration")],
)
def test_a_fresh_list_is_not_persistent(body: str, loop: str, why: str) -> None:
    ctx, scope = function(PERSISTENT.format(body=body, setup="losses = []", loop=loop))
    assert not persistent_argument(ctx, scope, "losses"), why


def test_a_function_passed_as_a_value_has_unknown_callers() -> None:
    ctx, scope = function(PERSISTENT.format(body="pass", setup="losses = []\nhooks = [step]", loop="pass"))
    assert not persistent_argument(ctx, scope, "losses")
    assert argument_values(ctx, scope, "losses") is None


def test_argument_values_are_what_the_callers_assign() -> None:
    ctx, scope = function(PERSISTENT.format(body="pass", setup="losses = Meter()", loop="pass"))
    assert [ctx.text(v) for v in argument_values(ctx, scope, "losses")] == ["Meter()"]


def test_the_module_scope_has_no_arguments() -> None:
    """A meter updated at a notebook's top level: the module is no function, so no caller binds it."""
    ctx = FileContext("t.py", "meter = Meter()\nfor x in data:\n    meter.update(x)\n")
    assert argument_values(ctx, scopes(ctx)[0], "meter") is None


def test_a_module_level_meter_update_is_checked_without_error() -> None:
    from fixer.engine import Options, process_source
    from fixer.registry import all_rules

    source = "import torch\nmeter = Meter()\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n    meter.update(loss)\n"
    result = process_source("t.py", source.encode(), Options(rules=tuple(all_rules())))
    assert result.errors == []


MUTUAL = """
import torch
def first(x, prev):
    loss = (x * prev).sum()
    loss.backward()
    for i in range(2):
        prev, _ = second(x, prev)
    return x * 2, loss
def second(x, prev):
    loss = (x * prev).sum()
    loss.backward()
    for i in range(2):
        prev, _ = first(x, prev)
    return x * 3, loss
"""


def test_step_functions_calling_each_other_in_loops_are_analysed_without_error() -> None:
    from fixer.engine import Options, process_source
    from fixer.registry import all_rules

    result = process_source("t.py", MUTUAL.encode(), Options(rules=tuple(all_rules())))
    assert result.errors == []
