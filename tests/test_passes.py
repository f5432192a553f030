"""Which ``if`` statements of a loop select its passes (fixer/analysis/passes.py): whole-body
filters and shared guards (several guards with one stable test)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from fixer.analysis.passes import is_pass_filter, shared_guards
from fixer.context import FileContext


def guards(source: str) -> list[bool]:
    """For each ``if`` of the loop's body, in order: is it a shared guard."""
    tree = ast.parse(textwrap.dedent(source))
    loop = tree.body[0]
    shared = shared_guards(loop, loop.body)
    return [any(node is g for g in shared) for node in loop.body if isinstance(node, ast.If)]


def filters(source: str) -> list[bool]:
    """is_pass_filter of each ``if`` in the source, in order."""
    ctx = FileContext("t.py", textwrap.dedent(source))
    return [is_pass_filter(ctx, node) for node in ast.walk(ctx.tree) if isinstance(node, ast.If)]


SHARED = """
for step, batch in enumerate(loader):
    loss = model(batch)
    if {test}:
        loss.backward()
    if {test}:
        opt.step()
"""


@pytest.mark.parametrize("test", ["step % k == 0", "(step + 1) % k == 0", "train", "not evaluate and step > 2", "step >= warmup"])
def test_guards_with_one_stable_test_select_passes(test: str) -> None:
    assert guards(SHARED.format(test=test)) == [True, True]


@pytest.mark.parametrize(
    "test, why",
    [
        ("step == 0", "selects one pass"),
        ("step + 1 == total", "selects one pass"),
        ("f(step) % 2 == 0", "a call may read anything"),
        ("model.training", "an attribute may change (model.train())"),
        ("flags[0]", "a subscript may change"),
    ],
)
def test_guards_that_may_not_run_together_stay_conditional(test: str, why: str) -> None:
    assert guards(SHARED.format(test=test)) == [False, False], why


def test_a_test_the_pass_may_change_is_not_shared() -> None:
    source = """
    for batch in loader:
        if ready:
            loss.backward()
        ready = check(batch)
        if ready:
            opt.step()
    """
    assert guards(source) == [False, False]


def test_a_test_handed_to_a_call_is_not_shared() -> None:
    source = """
    for batch in loader:
        if state:
            loss.backward()
        update(state)
        if state:
            opt.step()
    """
    assert guards(source) == [False, False]


def test_a_lone_guard_or_different_tests_stay_conditional() -> None:
    source = """
    for i, batch in enumerate(loader):
        loss = model(batch)
        loss.backward()
        if (i + 1) % k == 0:
            opt.step()
        if i % log_every == 0:
            print(loss.item())
    """
    assert guards(source) == [False, False]


def test_a_guard_with_else_is_not_shared() -> None:
    source = """
    for batch in loader:
        if train:
            loss.backward()
        else:
            pass
        if train:
            opt.step()
    """
    assert guards(source) == [False, False]


@pytest.mark.parametrize("test, selects", [("i % 10 == 0", True), ("i == 0", False), ("i // 2 == 3", True), ("len(i) % 2 == 0", False)])
def test_a_whole_body_filter_selects_many_passes_unless_it_pins_the_counter(test: str, selects: bool) -> None:
    source = f"""
    for i in range(100):
        if {test}:
            loss = model(x)
            loss.backward()
    """
    assert filters(source) == [selects]


def test_shared_guards_are_pass_filters_for_the_rules() -> None:
    assert filters(SHARED.format(test="step % k == 0")) == [True, True]
    assert filters(SHARED.format(test="step == 0")) == [False, False]


@pytest.mark.parametrize("test, shared", [("batch is not None", True), ("batch is not None and batch", False), ("batch", False)])
def test_an_identity_test_survives_calls_on_its_name(test: str, shared: bool) -> None:
    source = f"""
    for batch in loader:
        if {test}:
            loss.backward()
        log(batch)
        if {test}:
            opt.step()
    """
    assert guards(source) == [shared, shared]


@pytest.mark.parametrize("before", ["loss = model(batch)", "batch = batch * 2.0", "batch.mul_(2)"])
def test_what_the_pass_does_before_the_first_guard_cannot_split_them(before: str) -> None:
    source = f"""
    for batch in loader:
        {before}
        if batch is not None and batch:
            loss.backward()
        if batch is not None and batch:
            opt.step()
        batch = None
    """
    assert guards(source) == [True, True]


def test_a_name_some_function_rebinds_is_not_stable() -> None:
    source = textwrap.dedent("""
    def toggle():
        global train
        train = not train

    for batch in loader:
        if train:
            loss.backward()
        toggle()
        if train:
            opt.step()
    """)
    ctx = FileContext("t.py", source)
    assert [is_pass_filter(ctx, n) for n in ast.walk(ctx.tree) if isinstance(n, ast.If)] == [False, False]


PERIODIC = """
for i in {iterable}:
    loss = model(batch).sum()
    if {test}:
        loss.backward()
"""


@pytest.mark.parametrize(
    "iterable, test, expected",
    [
        ("range(100)", "i % 10 == 0", True),
        ("loader", "i % accumulation == 0", True),
        ("range(100)", "(i + 1) // 4 == 0", True),
        ("range(5)", "i % 10 == 0", False),  # one selected pass at most
        ("range(100)", "i == 3", False),  # one pass
        ("range(100)", "loss.item() > 1", False),  # data decides
        ("loader", "flag", False),  # all passes or none
    ],
)
def test_a_periodic_guard_selects_many_passes(iterable: str, test: str, expected: bool) -> None:
    from fixer.analysis.passes import periodic_guard

    ctx = FileContext("t.py", textwrap.dedent(PERIODIC.format(iterable=iterable, test=test)))
    loop = ctx.tree.body[0]
    guard = next(node for node in loop.body if isinstance(node, ast.If))
    assert periodic_guard(ctx, guard, loop) is expected
